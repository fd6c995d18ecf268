package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
)

// Lock two accounts for a transfer, all or nothing: the keys are taken in
// sorted order, so a transfer the other way round cannot deadlock with
// this one.
func ExampleLocker_NewMultiMutex() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-multi")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	mm, err := locker.NewMultiMutex([]string{"account/7", "account/3"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := mm.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("locked:", mm.Keys())
	for _, k := range mm.Keys() {
		// Hand each account's store its own token.
		fmt.Println(k, "token issued:", mm.Tokens()[k] > 0)
	}
	select {
	case <-mm.Done():
		fmt.Println("a key was lost: stop")
	default:
	}
	if err := mm.Unlock(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// locked: [account/3 account/7]
	// account/3 token issued: true
	// account/7 token issued: true
}

// At most two transcoders at a time: each holds a permit with its own
// lease and token; the third finds none free.
func ExampleLocker_NewSemaphore() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-semaphore")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	var held []*dlock.Semaphore
	for i := 0; i < 3; i++ {
		s, err := locker.NewSemaphore("transcoders", 2)
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := s.TryLock(ctx); err != nil {
			fmt.Println("transcoder", i, "waits: all permits held:", errors.Is(err, dlock.ErrNotAcquired))
			continue
		}
		fmt.Println("transcoder", i, "holds a permit, token issued:", s.Token() > 0)
		held = append(held, s)
	}
	for _, s := range held {
		_ = s.Unlock(ctx)
	}
	// Output:
	// transcoder 0 holds a permit, token issued: true
	// transcoder 1 holds a permit, token issued: true
	// transcoder 2 waits: all permits held: true
}

// The first client records the semaphore's number of permits; a client of
// another number is refused until the record is reset, once no client of
// the old number runs.
func ExampleLocker_ResetSemaphore() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-reset-semaphore")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	two, _ := locker.NewSemaphore("encoders", 2)
	if err := two.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	_ = two.Unlock(ctx)

	four, _ := locker.NewSemaphore("encoders", 4)
	err = four.TryLock(ctx)
	fmt.Println("4 permits on a key recorded with 2 refused:", errors.Is(err, dlock.ErrInvalidOption))

	cleared, err := locker.ResetSemaphore(ctx, "encoders", 2)
	fmt.Println("record of 2 cleared:", cleared, err)
	fmt.Println("4 permits now:", four.TryLock(ctx) == nil)
	_ = four.Unlock(ctx)
	// Output:
	// 4 permits on a key recorded with 2 refused: true
	// record of 2 cleared: true <nil>
	// 4 permits now: true
}
