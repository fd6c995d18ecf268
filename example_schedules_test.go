package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
)

// A job scheduled every minute on several instances whose clocks are a few
// seconds apart runs once a minute: with a minimum hold, the key stays held
// after a quick run ends, so an instance whose schedule fires later in the
// same minute skips the run.
func ExampleWithMinHold() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-minhold")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	run := func(instance string) {
		m, _ := locker.NewMutex("jobs/every-minute", dlock.WithMinHold(50*time.Second))
		if err := m.TryLock(ctx); errors.Is(err, dlock.ErrNotAcquired) {
			fmt.Println(instance, "skips: the job ran this minute")
			return
		} else if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(instance, "runs the job")
		// The key stays held until 50s after the TryLock.
		if err := m.Unlock(ctx); err != nil {
			fmt.Println(err)
		}
	}
	run("a") // a's clock is ahead: it runs first, and quickly
	run("b") // b's schedule fires later in the same minute
	// Output:
	// a runs the job
	// b skips: the job ran this minute
}

// A maximum hold bounds how long a holder keeps the lock: the context Do
// hands out ends at the bound, and the lock is released.
func ExampleWithMaxHold() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-maxhold")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	m, _ := locker.NewMutex("jobs/vacuum", dlock.WithMaxHold(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		<-ctx.Done() // a job that would run on
		return context.Cause(ctx)
	})
	fmt.Println("stopped at the bound:", errors.Is(err, dlock.ErrMaxHoldReached))
	// Output:
	// stopped at the bound: true
}
