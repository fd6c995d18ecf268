package etcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
)

// Open a Locker from a URL: every member of the cluster, the key prefix, and
// a default lease of 10s (whole seconds, at least 2s).
func Example_open() {
	ctx := context.Background()
	l, err := dlock.Open(ctx, "etcd://127.0.0.1:2381,127.0.0.1:2382,127.0.0.1:2383/myapp/locks?ttl=10s")
	if err != nil {
		log.Fatal(err) // matches dlock.ErrUnavailable when the cluster does not answer
	}
	defer l.Close()

	m, err := l.NewMutex("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost. Hand the token to whatever
		// the lock protects, so it can refuse a holder that lost it.
		fmt.Println("holding with token", m.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// New uses a client the program already has, for TLS or any other client
// setting. The client stays the caller's to close.
func ExampleNew() {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"127.0.0.1:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	l, err := etcd.New(cli, etcd.Config{Prefix: "myapp/locks"}, dlock.WithTTL(15*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	m, err := l.NewMutex("invoice-42")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Lock(ctx); err != nil { // waits in line, woken by a watch
		log.Fatal(err)
	}
	defer m.Unlock(context.Background())
	fmt.Println("lease", m.Lease().TTL, "token", m.Token())
}
