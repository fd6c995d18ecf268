package conformance

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// cancelGrantRounds is how many handoffs CancelAtGrant cancels. A driver
// that undid a cut-short acquire in the background (PostgreSQL, before
// the fix) left the key held after about one round in thirty: 150 rounds
// miss it about once in a hundred runs.
const cancelGrantRounds = 150

// cancelGrantStep is the step of the delay between a holder's Unlock and
// the cancellation of the waiter's Lock in even rounds: the delay cycles
// through 0, one step, ... fifteen steps (1.5 ms), as in etcd issue
// 10111. Odd rounds cycle through sixteen steps from 0 to twice the
// backend's measured handoff (from the holder's Unlock returning to the
// waiter's Lock returning), so that the cancellation lands, now and
// then, while the waiter's acquire is on its way, however fast the
// backend hands over.
const cancelGrantStep = 100 * time.Microsecond

// cancelGrantProbes is how many uncancelled handoffs measure the
// backend's handoff time.
const cancelGrantProbes = 7

// CancelAtGrant: a Lock whose context is cancelled as the lock is handed
// to it either returns nil and holds, or returns an error and holds
// nothing when it returns: a third Locker's TryLock then succeeds at once.
// etcd issue 10111 is the first half broken (a Lock that returned an
// error with the key held); a driver that undoes a cut-short acquire after
// Lock has returned breaks the second.
func (s *suite) cancelAtGrant(t *testing.T) {
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	holder := mustMutex(t, s.locker(t), key, dlock.WithTTL(ttl))
	waiter := mustMutex(t, s.locker(t), key, dlock.WithTTL(ttl))
	third := mustMutex(t, s.locker(t), key, dlock.WithTTL(ttl))
	handoff := s.measureHandoff(t, holder, waiter)
	t.Logf("handoff: %v (median of %d)", handoff, cancelGrantProbes)
	held, free := 0, 0
	for round := range cancelGrantRounds {
		delay := time.Duration(round/2%16) * cancelGrantStep
		if round%2 == 1 {
			delay = time.Duration(round/2%16) * 2 * handoff / 15
		}
		got, err := s.cancelAtGrantRound(t, holder, waiter, delay)
		if err != nil {
			t.Fatalf("round %d (cancelled %v after Unlock): %v", round, delay, err)
		}
		if got == nil {
			held++
			if waiter.Token() == 0 {
				t.Fatalf("round %d (cancelled %v after Unlock): Lock returned nil, and Token() = 0", round, delay)
			}
			if err := tryLockNow(third); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("round %d (cancelled %v after Unlock): Lock returned nil, and a third Locker's TryLock: %v; want ErrNotAcquired",
					round, delay, err)
			}
			if err := unlockNow(waiter); err != nil {
				t.Fatalf("round %d: Unlock of the waiter whose Lock returned nil: %v", round, err)
			}
			continue
		}
		free++
		if waiter.Token() != 0 {
			t.Fatalf("round %d (cancelled %v after Unlock): Lock returned %v, and Token() = %d; want 0", round, delay, got, waiter.Token())
		}
		if err := tryLockNow(third); err != nil {
			t.Fatalf("round %d (cancelled %v after Unlock): Lock returned %v, and a third Locker's TryLock at once: %v; want the key free",
				round, delay, got, err)
		}
		if err := unlockNow(third); err != nil {
			t.Fatalf("round %d: Unlock of the third Locker's hold: %v", round, err)
		}
	}
	t.Logf("%d rounds: the cancelled Lock held %d times and returned an error %d times", cancelGrantRounds, held, free)
}

// measureHandoff returns the median time from holder's Unlock returning
// to waiter's Lock, blocked on the key meanwhile, returning.
func (s *suite) measureHandoff(t *testing.T, holder, waiter *dlock.Mutex) time.Duration {
	ds := make([]time.Duration, 0, cancelGrantProbes)
	for range cancelGrantProbes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := holder.Lock(ctx); err != nil {
			cancel()
			t.Fatalf("holder's Lock: %v", err)
		}
		locked := make(chan error, 1)
		go func() { locked <- waiter.Lock(ctx) }()
		time.Sleep(10 * time.Millisecond)
		if err := holder.Unlock(ctx); err != nil {
			cancel()
			t.Fatalf("holder's Unlock: %v", err)
		}
		released := time.Now()
		err := <-locked
		ds = append(ds, time.Since(released))
		if err != nil {
			cancel()
			t.Fatalf("waiter's Lock: %v", err)
		}
		if err := waiter.Unlock(ctx); err != nil {
			cancel()
			t.Fatalf("waiter's Unlock: %v", err)
		}
		cancel()
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// cancelAtGrantRound has holder take the key and waiter block in Lock on
// it; then holder unlocks and, delay after its Unlock returned, the
// waiter's context is cancelled. It returns what the waiter's Lock
// returned; err is a failure of the round's set-up.
func (s *suite) cancelAtGrantRound(t *testing.T, holder, waiter *dlock.Mutex, delay time.Duration) (got, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := holder.Lock(ctx); err != nil {
		return nil, errors.Join(errors.New("holder's Lock"), err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	locked := make(chan error, 1)
	go func() { locked <- waiter.Lock(wctx) }()
	// Let the waiter reach its wait. On a slow machine it may not have:
	// its Lock is then cancelled on its way, which the contract covers
	// all the same.
	time.Sleep(10 * time.Millisecond)
	if err := holder.Unlock(ctx); err != nil {
		stop()
		<-locked
		return nil, errors.Join(errors.New("holder's Unlock"), err)
	}
	// Spin: a sleep of less than a millisecond overshoots by about as much.
	for start := time.Now(); time.Since(start) < delay; {
	}
	stop()
	select {
	case got = <-locked:
		return got, nil
	case <-time.After(slack):
		return nil, errors.New("the waiter's Lock did not return after its context was cancelled")
	}
}

// tryLockNow calls m.TryLock with a context that only bounds a hang.
func tryLockNow(m *dlock.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), slack)
	defer cancel()
	return m.TryLock(ctx)
}

// unlockNow calls m.Unlock with a context that only bounds a hang.
func unlockNow(m *dlock.Mutex) error {
	ctx, cancel := context.WithTimeout(context.Background(), slack)
	defer cancel()
	return m.Unlock(ctx)
}
