package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/postgres"
)

// Open a Locker from a URL: the usual connection string, the lease table,
// and a default lease of 10s. The table is created if it does not exist.
func Example_open() {
	ctx := context.Background()
	l, err := dlock.Open(ctx, "postgres://app:secret@127.0.0.1:5432/app?sslmode=disable&table=app_locks&ttl=10s")
	if err != nil {
		log.Fatal(err) // matches dlock.ErrUnavailable when the server does not answer
	}
	defer l.Close()

	m, err := l.NewMutex("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost.
		fmt.Println("holding with token", m.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// The lock and the data in one database: the lock check and the fenced
// write are one transaction, so a holder paused past its lease (GC, swap, a
// stalled VM) cannot commit once another holder has the key. New uses the
// pool the program already has, and leaves it open on Close.
func ExampleFence_Tx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app:secret@127.0.0.1:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	opts := postgres.Config{Table: "app_locks"}
	l, err := postgres.New(ctx, pool, opts, dlock.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	f, err := postgres.NewFence(opts)
	if err != nil {
		log.Fatal(err)
	}

	m, err := l.NewMutex("stock/42")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)

	// ... work that may take longer than it should ...

	err = f.Tx(ctx, pool, m.Key(), m.Token(), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE stock SET n = n - 1 WHERE id = 42`)
		return err
	})
	if errors.Is(err, dlock.ErrLockLost) {
		log.Print("lost the lock: nothing was written") // the UPDATE was rolled back
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}
