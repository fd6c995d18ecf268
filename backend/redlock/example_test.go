package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
)

// Open a Locker over five independent masters by URL: the blank import
// of the package (here a named one) registers redlock://.
func Example_open() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx,
		"redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379,10.0.0.4:6379,10.0.0.5:6379"+
			"?ttl=10s&timeout=50ms&prefix=billing:")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	m, err := locker.NewMutex("invoices/2026-11")
	if err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		// Held by a majority of the masters. ctx is cancelled if that ends.
		// Hand the token to the resource so that it can refuse a stale
		// holder (see package fence).
		fmt.Println("token", m.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// New takes go-redis clients the program already has, one per master.
func ExampleNew() {
	var clients []*redis.Client
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		clients = append(clients, redis.NewClient(&redis.Options{
			Addr: addr,
			// Let requests end at the per-instance timeout.
			ContextTimeoutEnabled: true,
		}))
	}
	locker, err := redlock.New(clients, redlock.Config{Timeout: 50 * time.Millisecond}, dlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // the clients stay open: they are the caller's

	m, err := locker.NewMutex("reports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.TryLock(context.Background()); err != nil {
		log.Fatal(err) // errors.Is(err, dlock.ErrNotAcquired) when another holder has it
	}
	defer m.Unlock(context.Background())
}

// The driver itself reports, per instance, how many requests failed or
// timed out.
func ExampleDriver_Stats() {
	ctx := context.Background()
	drv, err := redlock.OpenDriver(ctx, "redlock://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379")
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dlock.NewLocker(drv)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // closes the driver too
	for _, s := range drv.Stats() {
		fmt.Printf("%s: %d requests, %d errors, %d timeouts\n", s.Addr, s.Requests, s.Errors, s.Timeouts)
	}
}
