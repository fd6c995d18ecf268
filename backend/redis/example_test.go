package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis"
)

// Open a Locker from a URL, as configuration would give it. The blank or
// named import of this package registers the redis schemes.
func Example_open() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "redis://127.0.0.1:6379/0?prefix=myapp&ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	m, err := locker.NewMutex("invoices/2024-06")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	// Hand the token to the resource, so that it can refuse a holder
	// that was paused past its lease.
	fmt.Println("holding with token", m.Token())
}

// New takes a go-redis client the program already has. The client stays
// the program's: closing the Locker does not close it.
func ExampleNew() {
	ctx := context.Background()
	client := goredis.NewClient(&goredis.Options{
		Addr:                  "127.0.0.1:6379",
		ContextTimeoutEnabled: true, // let contexts bound every call
	})
	defer client.Close()

	locker, err := redis.New(ctx, client, redis.Config{Prefix: "myapp"}, dlock.WithTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	m, _ := locker.NewMutex("orders/42")
	switch err := m.TryLock(ctx); {
	case err == nil:
		defer m.Unlock(ctx)
		fmt.Println("got it")
	case errors.Is(err, dlock.ErrNotAcquired):
		fmt.Println("someone else has it")
	default:
		log.Fatal(err)
	}
}

// With replicas, wait_replicas makes each acquire and renew wait until that
// many replicas have the lock, so that a failover right after Lock returns
// does not lose it.
func ExampleNew_replicas() {
	ctx := context.Background()
	client := goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName:            "mymaster",
		SentinelAddrs:         []string{"127.0.0.1:26379"},
		ContextTimeoutEnabled: true,
	})
	defer client.Close()
	locker, err := redis.New(ctx, client, redis.Config{WaitReplicas: 1, WaitTimeout: 200 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
}

// LockKey names the Redis key of a lock, for operators: DEL on it breaks
// the lock (its holder notices at its next renewal).
func ExampleLockKey() {
	fmt.Println(redis.LockKey("myapp", "orders/42"))
	fmt.Println(redis.LockKey("myapp", "odd{key}"))
	// Output:
	// {myapp:orders/42}:lock
	// {myapp:odd%7Bkey%7D}:lock
}
