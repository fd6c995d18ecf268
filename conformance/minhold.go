package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/observe"
)

// The minimum and maximum hold (dlock.WithMinHold, dlock.WithMaxHold):
// a hold released before its minimum leaves the key held on the store
// until the minimum has passed from the grant (driver.Lapser), and is no
// loss; a hold that reaches its maximum is ended and released by the
// watchdog. The cases assert what is held when, never how fast: a check
// that ran too late to say anything is skipped, not failed.

// minHold is the minimum hold the cases use: a few seconds, and no
// shorter than the harness's TTL (a backend whose shortest lease is
// long, Consul's 10 s, cannot keep a shorter minimum any better).
func (h Harness) minHold() time.Duration { return max(3*time.Second, h.ttl()) }

// maxHold is the maximum hold the cases use.
func (h Harness) maxHold() time.Duration { return max(2*time.Second, h.ttl()) }

// holdEnds records the ends an observer hears of.
type holdEnds struct {
	mu   sync.Mutex
	ends []observe.HoldEnd
}

func (r *holdEnds) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (r *holdEnds) Step(context.Context, observe.Call, observe.Step)          {}
func (r *holdEnds) End(context.Context, observe.Call, observe.Result)         {}
func (r *holdEnds) HoldEnd(e observe.HoldEnd) {
	r.mu.Lock()
	r.ends = append(r.ends, e)
	r.mu.Unlock()
}

func (r *holdEnds) all() []observe.HoldEnd {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observe.HoldEnd(nil), r.ends...)
}

// notBefore is how much earlier than the minimum a store may free a key
// without breaking it: the clock allowance dlock makes for a lease, and a
// few milliseconds of rounding.
func notBefore(d time.Duration) time.Duration { return driver.DriftAllowance(d) + 10*time.Millisecond }

// heldUntilMinimum checks that key, whose hold was released early with a
// minimum hold of minHold counted from no earlier than start, is held
// (a TryLock through l is refused) while the minimum runs, and is taken
// by a Lock through l once it has passed, not before.
func (s *suite) heldUntilMinimum(t *testing.T, l *dlock.Locker, key string, start time.Time, minHold time.Duration) {
	t.Helper()
	m2 := mustMutex(t, l, key, dlock.WithTTL(s.h.longTTL()))
	err := m2.TryLock(ctxFor(t, 10*time.Second))
	switch since := time.Since(start); {
	case err == nil && since < minHold-notBefore(minHold):
		_ = m2.Unlock(ctxFor(t, 10*time.Second))
		t.Fatalf("TryLock through another Locker %v after the grant succeeded; want ErrNotAcquired until the minimum hold of %v", since, minHold)
	case err == nil:
		_ = m2.Unlock(ctxFor(t, 10*time.Second))
		t.Fatalf("TryLock through another Locker ran %v after the grant, past the minimum of %v: the case could not check the hold", since, minHold)
	case !errors.Is(err, dlock.ErrNotAcquired):
		t.Fatalf("TryLock through another Locker during the minimum hold: %v; want ErrNotAcquired", err)
	}
	if err := m2.Lock(ctxFor(t, minHold+s.h.ExpiryGrace+s.h.longTTL()+slack)); err != nil {
		t.Fatalf("Lock through another Locker after the minimum hold: %v; want the key, free once the minimum has passed", err)
	}
	if since := time.Since(start); since < minHold-notBefore(minHold) {
		t.Errorf("another Locker took the key %v after the grant; want no earlier than the minimum hold of %v", since, minHold)
	}
	if err := m2.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// Case: an Unlock before the minimum hold returns nil and ends the hold
// as unlocked (Err is ErrUnlocked, an observer hears of no loss), while
// the key stays held on the store until the minimum has passed from the
// grant; then another Locker takes it.
func (s *suite) minHoldUnlock(t *testing.T) {
	minHold := s.h.minHold()
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	rec := &holdEnds{}
	m := mustMutex(t, l1, key, dlock.WithTTL(s.h.ttl()), dlock.WithMinHold(minHold), dlock.WithObserver(rec))
	start := time.Now()
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := m.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock before the minimum hold: %v; want nil", err)
	}
	if err := m.Err(); !errors.Is(err, dlock.ErrUnlocked) {
		t.Errorf("Err after an Unlock before the minimum hold: %v; want ErrUnlocked", err)
	}
	ends := rec.all()
	if len(ends) != 1 || ends[0].Lost || !errors.Is(ends[0].Cause, dlock.ErrUnlocked) || observe.LossCause(ends[0].Cause) != "" {
		t.Errorf("HoldEnd after an Unlock before the minimum hold: %+v; want one, not Lost, Cause ErrUnlocked", ends)
	}
	s.heldUntilMinimum(t, l2, key, start, minHold)
}

// Case: closing the holder's Locker before the minimum hold leaves the key
// held until the minimum has passed from the grant, and the hold ends as
// closed, not lost.
func (s *suite) minHoldClose(t *testing.T) {
	minHold := s.h.minHold()
	l2 := s.locker(t)
	ctx := ctxFor(t, 30*time.Second)
	l1, err := s.h.NewLocker(ctx)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { _ = l1.Close() })
	key := s.key(t, "k")
	rec := &holdEnds{}
	m := mustMutex(t, l1, key, dlock.WithTTL(s.h.ttl()), dlock.WithMinHold(minHold), dlock.WithObserver(rec))
	start := time.Now()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := l1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := m.Err(); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("Err after Close before the minimum hold: %v; want ErrClosed", err)
	}
	if ends := rec.all(); len(ends) != 1 || ends[0].Lost {
		t.Errorf("HoldEnd after Close before the minimum hold: %+v; want one, not Lost", ends)
	}
	s.heldUntilMinimum(t, l2, key, start, minHold)
}

// Case: an Unlock once the minimum hold has passed frees the key at once,
// as without one.
func (s *suite) minHoldPassed(t *testing.T) {
	const minHold = time.Second
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	m := mustMutex(t, l1, key, dlock.WithTTL(s.h.longTTL()), dlock.WithMinHold(minHold))
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	time.Sleep(minHold + 100*time.Millisecond)
	if err := m.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock after the minimum hold: %v", err)
	}
	m2 := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TryLock through another Locker right after an Unlock past the minimum hold: %v; want the key, free at once", err)
	}
	_ = m2.Unlock(ctxFor(t, 10*time.Second))
}

// Case: a Semaphore's permit keeps its minimum hold as a Mutex does: an
// early Unlock leaves the permit taken until the minimum has passed.
func (s *suite) minHoldSemaphore(t *testing.T) {
	minHold := s.h.minHold()
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "sem")
	sem, err := l1.NewSemaphore(key, 1, dlock.WithTTL(s.h.ttl()), dlock.WithMinHold(minHold))
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	start := time.Now()
	if err := sem.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Semaphore Lock: %v", err)
	}
	if err := sem.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Semaphore Unlock before the minimum hold: %v", err)
	}
	if err := sem.Err(); !errors.Is(err, dlock.ErrUnlocked) {
		t.Errorf("Semaphore Err after an early Unlock: %v; want ErrUnlocked", err)
	}
	other, err := l2.NewSemaphore(key, 1, dlock.WithTTL(s.h.longTTL()))
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	err = other.TryLock(ctxFor(t, 10*time.Second))
	switch since := time.Since(start); {
	case err == nil && since < minHold-notBefore(minHold):
		t.Fatalf("a Semaphore of another Locker took the permit %v after the grant; want ErrNotAcquired until the minimum hold of %v", since, minHold)
	case err == nil:
		t.Fatalf("Semaphore TryLock ran %v after the grant, past the minimum of %v: the case could not check the hold", since, minHold)
	case !errors.Is(err, dlock.ErrNotAcquired):
		t.Fatalf("Semaphore TryLock through another Locker during the minimum hold: %v; want ErrNotAcquired", err)
	default:
		if err := other.Lock(ctxFor(t, minHold+s.h.ExpiryGrace+s.h.longTTL()+slack)); err != nil {
			t.Fatalf("Semaphore Lock after the minimum hold: %v", err)
		}
		if since := time.Since(start); since < minHold-notBefore(minHold) {
			t.Errorf("another Locker took the permit %v after the grant; want no earlier than the minimum hold of %v", since, minHold)
		}
	}
	_ = other.Unlock(ctxFor(t, 10*time.Second))
}

// Case: a hold that reaches its maximum is ended by the watchdog, not
// before: Done closes, Err and Do's context cause match ErrLockLost and
// ErrMaxHoldReached, an observer hears of a loss whose LossCause is
// "max_hold", the key is released (another Locker takes it without
// waiting for a lease to run out), and Unlock reports the same error.
func (s *suite) maxHold(t *testing.T) {
	maxHold := s.h.maxHold()
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	rec := &holdEnds{}
	m := mustMutex(t, l1, key, dlock.WithTTL(s.h.longTTL()), dlock.WithMaxHold(maxHold), dlock.WithObserver(rec))
	start := time.Now()
	var cause error
	err := dlock.Do(ctxFor(t, maxHold+s.h.longTTL()+slack), m, func(ctx context.Context) error {
		<-ctx.Done()
		cause = context.Cause(ctx)
		return nil
	})
	held := time.Since(start)
	if held < maxHold {
		t.Errorf("the hold ended %v after Lock began; want no earlier than its maximum of %v", held, maxHold)
	}
	if !errors.Is(cause, dlock.ErrLockLost) || !errors.Is(cause, dlock.ErrMaxHoldReached) {
		t.Errorf("Do's context cause at the maximum hold: %v; want ErrLockLost and ErrMaxHoldReached", cause)
	}
	if !errors.Is(err, dlock.ErrMaxHoldReached) {
		t.Errorf("Do at the maximum hold: %v; want ErrMaxHoldReached", err)
	}
	if err := m.Err(); !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrMaxHoldReached) {
		t.Errorf("Err at the maximum hold: %v; want ErrLockLost and ErrMaxHoldReached", err)
	}
	ends := rec.all()
	if len(ends) != 1 || !ends[0].Lost || observe.LossCause(ends[0].Cause) != "max_hold" {
		t.Errorf("HoldEnd at the maximum hold: %+v; want one, Lost, LossCause max_hold", ends)
	}
	// Released, not left to expire: the lease is long, so a Lock bounded
	// by much less than it gets the key only if the watchdog released it.
	m2 := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	if err := m2.Lock(ctxFor(t, s.h.longTTL()/2)); err != nil {
		t.Fatalf("Lock through another Locker after the maximum hold: %v; want the key, released by the watchdog", err)
	}
	_ = m2.Unlock(ctxFor(t, 10*time.Second))

	// The same with Lock and Unlock: Unlock reports why the hold ended.
	m3 := mustMutex(t, l1, s.key(t, "k3"), dlock.WithTTL(s.h.longTTL()), dlock.WithMaxHold(maxHold))
	if err := m3.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	select {
	case <-m3.Done():
	case <-time.After(maxHold + s.h.longTTL() + slack):
		t.Fatalf("Done still open %v after the maximum hold of %v", s.h.longTTL()+slack, maxHold)
	}
	if err := m3.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrMaxHoldReached) {
		t.Errorf("Unlock after the maximum hold: %v; want ErrLockLost and ErrMaxHoldReached", err)
	}
}

// Case: out-of-range minimum and maximum holds are refused with
// ErrInvalidOption by NewMutex, NewLocker and Open's parameters (a
// malformed one with ErrInvalidURL); equal ones are accepted.
func (s *suite) minMaxErrors(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	l := s.locker(t)
	key := s.key(t, "k")
	bad := map[string][]dlock.Option{
		"a negative minimum":           {dlock.WithMinHold(-time.Second)},
		"a negative maximum":           {dlock.WithMaxHold(-time.Second)},
		"a maximum below the minimum":  {dlock.WithMinHold(2 * time.Second), dlock.WithMaxHold(time.Second)},
		"a minimum above dlock.MaxTTL": {dlock.WithMinHold(dlock.MaxTTL + time.Hour)},
	}
	for what, opts := range bad {
		if _, err := l.NewMutex(key, opts...); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("NewMutex with %s: %v; want ErrInvalidOption", what, err)
		}
		if l2, err := s.h.NewLocker(ctx, opts...); err == nil {
			_ = l2.Close()
			t.Errorf("NewLocker with %s succeeded; want ErrInvalidOption", what)
		} else if !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("NewLocker with %s: %v; want ErrInvalidOption", what, err)
		}
	}
	if _, err := l.NewMutex(key, dlock.WithMinHold(time.Second), dlock.WithMaxHold(time.Second)); err != nil {
		t.Errorf("NewMutex with equal minimum and maximum: %v", err)
	}
	for _, p := range []string{"minhold=-1s", "maxhold=-1s", "minhold=2s&maxhold=1s"} {
		if l2, err := dlock.Open(ctx, withParam(s.h.URL, p)); err == nil {
			_ = l2.Close()
			t.Errorf("Open with %s succeeded; want ErrInvalidOption", p)
		} else if !errors.Is(err, dlock.ErrInvalidURL) || !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("Open with %s: %v; want ErrInvalidURL and ErrInvalidOption", p, err)
		}
	}
	for _, p := range []string{"minhold=abc", "maxhold=1x"} {
		if l2, err := dlock.Open(ctx, withParam(s.h.URL, p)); err == nil {
			_ = l2.Close()
			t.Errorf("Open with %s succeeded; want ErrInvalidURL", p)
		} else if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open with %s: %v; want ErrInvalidURL", p, err)
		}
	}
	l3, err := dlock.Open(ctx, withParam(s.h.URL, "minhold=1s&maxhold=1m"))
	if err != nil {
		t.Fatalf("Open with minhold=1s&maxhold=1m: %v", err)
	}
	_ = l3.Close()
}

func (s *suite) minMaxCases() []namedCase {
	return []namedCase{
		{"MinHoldUnlock", s.minHoldUnlock},
		{"MinHoldClose", s.minHoldClose},
		{"MinHoldPassed", s.minHoldPassed},
		{"MinHoldSemaphore", s.minHoldSemaphore},
		{"MaxHold", s.maxHold},
		{"MinMaxErrors", s.minMaxErrors},
	}
}
