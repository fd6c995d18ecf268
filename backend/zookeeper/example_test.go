package zookeeper_test

import (
	"context"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/zookeeper"
)

// Open a Locker on an ensemble by URL, and run a critical section under a
// lock: the function's context is cancelled if the lock is lost (the
// session expired, or the client was cut off long enough that it may have).
func Example() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "zk://127.0.0.1:2182,127.0.0.1:2183,127.0.0.1:2184/myapp/locks?session_timeout=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	m, err := locker.NewMutex("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		// Hand m.Token() (the czxid of our node) to the resource so it can
		// refuse a stale holder.
		log.Printf("holding with token %d", m.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// New makes a Locker over a connection the program already has. The
// Locker does not close it.
func ExampleNew() {
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	locker, err := zookeeper.New(conn, zookeeper.Config{
		SessionTimeout: 10 * time.Second, // what the server grants: keep it within its bounds
		Prefix:         "/myapp/locks",
	}) // TTL: the session timeout, the only lease ZooKeeper can honour
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	m, err := locker.NewMutex("jobs/42")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())
	select {
	case <-m.Done():
		log.Print("lost the lock")
	default:
		log.Printf("holding jobs/42 with token %d", m.Token())
	}
}

// KeyPath names the znode under which a key's lock nodes queue. Another
// lock recipe using the same names (go-zookeeper's zk.Lock, Curator's
// InterProcessMutex) on that path shares the queue with dlock.
func ExampleKeyPath() {
	p, err := zookeeper.KeyPath("/myapp/locks", "jobs/42")
	if err != nil {
		log.Fatal(err)
	}
	conn, _, err := zk.Connect([]string{"127.0.0.1:2181"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	l := zk.NewLock(conn, p, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil { // excludes dlock Mutexes on "jobs/42"
		log.Fatal(err)
	}
	defer l.Unlock()
}
