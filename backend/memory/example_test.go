package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
)

// Two Lockers on one Store behave like two processes on one server: while
// one holds a key, the other's TryLock is refused.
func ExampleNew() {
	ctx := context.Background()
	store := memory.NewStore()
	a, _ := memory.New(store, dlock.WithTTL(10*time.Second))
	defer a.Close()
	b, _ := memory.New(store)
	defer b.Close()

	ma, _ := a.NewMutex("orders/42")
	if err := ma.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	mb, _ := b.NewMutex("orders/42")
	err := mb.TryLock(ctx)
	fmt.Println("second Locker refused:", errors.Is(err, dlock.ErrNotAcquired))

	_ = ma.Unlock(ctx)
	fmt.Println("after Unlock:", mb.TryLock(ctx))
	_ = mb.Unlock(ctx)
	// Output:
	// second Locker refused: true
	// after Unlock: <nil>
}

// Open("mem://NAME") shares one Store per name across the process.
func ExampleStore_open() {
	ctx := context.Background()
	a, _ := dlock.Open(ctx, "mem://example-shared")
	defer a.Close()
	b, _ := dlock.Open(ctx, "mem://example-shared?ttl=5s")
	defer b.Close()

	ma, _ := a.NewMutex("job")
	_ = ma.Lock(ctx)
	defer ma.Unlock(ctx)
	mb, _ := b.NewMutex("job")
	fmt.Println(errors.Is(mb.TryLock(ctx), dlock.ErrNotAcquired))
	// Output: true
}

// Break ends a hold from outside, as an operator deleting a lock would: the
// holder's Done closes and Err says the backend ended it.
func ExampleStore_Break() {
	ctx := context.Background()
	store := memory.NewStore()
	l, _ := memory.New(store)
	defer l.Close()
	m, _ := l.NewMutex("report")
	_ = m.Lock(ctx)

	store.Break("report")
	<-m.Done()
	fmt.Println("lost:", errors.Is(m.Err(), dlock.ErrLockLost))
	fmt.Println("reported by the backend:", errors.Is(m.Err(), dlock.ErrReportedLost))
	// Output:
	// lost: true
	// reported by the backend: true
}

// Do runs a function under the lock and unlocks when it returns (or
// panics). Its context ends if the hold is lost.
func ExampleNew_do() {
	ctx := context.Background()
	l, _ := memory.New(memory.NewStore())
	defer l.Close()
	m, _ := l.NewMutex("nightly")

	err := dlock.Do(ctx, m, func(ctx context.Context) error {
		fmt.Println("valid while working:", m.Lease().Valid() && ctx.Err() == nil)
		return nil
	})
	fmt.Println("Do:", err, "then:", m.Err())
	// Output:
	// valid while working: true
	// Do: <nil> then: dlock: unlocked
}
