package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
)

// Open a Locker from a URL, take a lock, and hand its fencing token to the
// protected resource.
func ExampleOpen() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-open?ttl=10s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	m, err := locker.NewMutex("orders/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held, token > 0:", m.Token() > 0, "lease:", m.Lease().TTL)
	if err := m.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output: held, token > 0: true lease: 10s
}

// Do runs a function under the lock; its context is cancelled if the lock
// is lost, and the lock is released when the function returns.
func ExampleDo() {
	ctx := context.Background()
	locker, _ := dlock.Open(ctx, "mem://example-do")
	defer locker.Close()
	m, _ := locker.NewMutex("nightly-report")

	err := dlock.Do(ctx, m, func(ctx context.Context) error {
		// Work here; stop when ctx is done (the lock was lost).
		// Hand m.Token() to the resource: larger for every new holder.
		fmt.Println("running with a token:", m.Token() > 0)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// running with a token: true
	// err: <nil>
}

// TryLock makes one attempt: a held key is ErrNotAcquired.
func ExampleMutex_TryLock() {
	ctx := context.Background()
	locker, _ := dlock.Open(ctx, "mem://example-trylock")
	defer locker.Close()
	a, _ := locker.NewMutex("job")
	b, _ := locker.NewMutex("job")

	_ = a.Lock(ctx)
	err := b.TryLock(ctx)
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	_ = a.Unlock(ctx)
	fmt.Println(b.TryLock(ctx))
	_ = b.Unlock(ctx)
	// Output:
	// true
	// <nil>
}

// Lock waits for the holder, within the context's deadline.
func ExampleMutex_Lock() {
	ctx := context.Background()
	locker, _ := dlock.Open(ctx, "mem://example-lock")
	defer locker.Close()
	holder, _ := locker.NewMutex("stock/sku-1")
	waiter, _ := locker.NewMutex("stock/sku-1")
	_ = holder.Lock(ctx)
	first := holder.Token()

	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := waiter.Lock(wctx)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))

	time.AfterFunc(20*time.Millisecond, func() { _ = holder.Unlock(ctx) })
	fmt.Println(waiter.Lock(ctx), waiter.Token() > first)
	_ = waiter.Unlock(ctx)
	// Output:
	// true
	// <nil> true
}

// Renewal trouble and losses are logged with log/slog; without WithLogger
// dlock logs nothing.
func ExampleWithLogger() {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	locker, err := dlock.Open(ctx, "mem://", dlock.WithLogger(logger))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	m, _ := locker.NewMutex("jobs/nightly")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	// Output:
}

// Leader election: Do campaigns, runs the leader's work for as long as
// the term lasts (its context ends if leadership is lost), and resigns.
// Token is the fencing token to hand to what the leader writes to; Observe
// follows the leaders from anywhere.
func ExampleElection() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-election?ttl=10s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	follower, _ := locker.NewElection("scheduler")
	leaders, _ := follower.Observe(ctx)

	e, err := locker.NewElection("scheduler", dlock.WithOwner("host=a"))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = dlock.Do(ctx, e, func(ctx context.Context) error {
		l := <-leaders
		fmt.Println("observed:", l.Value, l.Token == e.Token())
		// A real leader loops until ctx ends: for { select { case
		// <-ctx.Done(): return ctx.Err(); case <-tick.C: work(e.Token()) } }
		return nil
	})
	fmt.Println("led:", err)
	_, err = follower.Leader(ctx)
	fmt.Println("after the term:", errors.Is(err, dlock.ErrNoLeader))
	// Output:
	// observed: host=a true
	// led: <nil>
	// after the term: true
}

// A job that runs on one instance of several: each instance tries the lock
// when its schedule fires, and skips the run if another holds it.
func ExampleMutex_TryLock_cron() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-cron")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	var run func(instance string)
	run = func(instance string) {
		m, _ := locker.NewMutex("jobs/nightly-report")
		if err := m.TryLock(ctx); errors.Is(err, dlock.ErrNotAcquired) {
			fmt.Println(instance, "skips: another instance runs the job")
			return
		} else if err != nil {
			fmt.Println(err)
			return
		}
		defer m.Unlock(ctx)
		fmt.Println(instance, "runs the job with token > 0:", m.Token() > 0)
		if instance == "a" {
			run("b") // b's schedule fires while a runs
		}
	}
	run("a")
	// Output:
	// a runs the job with token > 0: true
	// b skips: another instance runs the job
}
