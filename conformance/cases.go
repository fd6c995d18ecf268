package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Case 1: a Lock/Unlock round trip, and what a held Mutex reports.
func (s *suite) lockUnlock(t *testing.T) {
	l := s.locker(t)
	ttl := s.h.longTTL()
	m := mustMutex(t, l, s.key(t, "k"), dlock.WithTTL(ttl))
	if m.Token() != 0 || !isClosed(m.Done()) || m.Lease() != (dlock.Lease{}) {
		t.Fatalf("before Lock: Token=%d Lease=%+v Done closed=%v; want 0, zero, closed", m.Token(), m.Lease(), isClosed(m.Done()))
	}
	before := time.Now()
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	after := time.Now()
	lease := m.Lease()
	if m.Token() == 0 || lease.Token != m.Token() {
		t.Fatalf("held: Token()=%d Lease().Token=%d; want equal and > 0", m.Token(), lease.Token)
	}
	if lease.TTL < ttl {
		t.Fatalf("Lease().TTL=%v; want at least the requested %v", lease.TTL, ttl)
	}
	if !lease.Expires.After(after) {
		t.Fatalf("Lease().Expires=%v is not in the future", lease.Expires)
	}
	if !s.h.SessionLease && lease.Expires.After(before.Add(lease.TTL)) {
		t.Fatalf("Lease().Expires is %v after the request was sent; want at most TTL %v", lease.Expires.Sub(before), lease.TTL)
	}
	if s.h.SessionLease && lease.Expires.After(after.Add(lease.TTL)) {
		t.Fatalf("Lease().Expires is %v after Lock returned; want at most TTL %v", lease.Expires.Sub(after), lease.TTL)
	}
	if lease.Expires.After(time.Now().Add(lease.TTL)) {
		t.Fatalf("Lease().Expires later than now+TTL")
	}
	if !lease.Valid() {
		t.Fatal("Lease().Valid() = false while held")
	}
	done := m.Done()
	if isClosed(done) {
		t.Fatal("Done() closed while held")
	}
	if err := m.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if !isClosed(done) {
		t.Fatal("Done() not closed after Unlock")
	}
	if m.Token() != 0 {
		t.Fatalf("Token()=%d after Unlock; want 0", m.Token())
	}
	m2 := mustMutex(t, s.locker(t), m.Key(), dlock.WithTTL(ttl))
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TryLock by another Locker after Unlock: %v", err)
	}
	if err := m2.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// Case 2: TryLock on a key held through another Locker, and through another
// Mutex of the same Locker.
func (s *suite) tryLockHeld(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	m1 := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	for name, l := range map[string]*dlock.Locker{"another Locker": l2, "the same Locker": l1} {
		m := mustMutex(t, l, key, dlock.WithTTL(ttl))
		err := m.TryLock(ctxFor(t, 10*time.Second))
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock through %s on a held key: %v; want ErrNotAcquired", name, err)
		}
		if m.Token() != 0 {
			t.Fatalf("TryLock through %s failed but Token()=%d", name, m.Token())
		}
	}
	if err := m1.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	m2 := mustMutex(t, l2, key, dlock.WithTTL(ttl))
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	_ = m2.Unlock(ctxFor(t, 10*time.Second))
}

// Case 3: mutual exclusion under contention, over several Lockers.
func (s *suite) exclusion(t *testing.T) {
	const (
		lockers    = 2
		goroutines = 8
		rounds     = 12
	)
	key := s.key(t, "k")
	var (
		// The counter is read, then written back one higher after a pause:
		// only the lock keeps increments from being lost. Load and Store
		// are atomic only so that the race detector, which cannot see the
		// ordering a lock server provides between processes' connections,
		// stays quiet; they do not make the increment atomic.
		counter  atomic.Int64
		inside   atomic.Int32
		overlaps atomic.Int32
		wg       sync.WaitGroup
		errs     = make(chan error, goroutines)
	)
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		ls[i] = s.locker(t)
	}
	ctx := ctxFor(t, 5*time.Minute)
	for g := 0; g < goroutines; g++ {
		m := mustMutex(t, ls[g%lockers], key, dlock.WithTTL(s.h.longTTL()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if err := m.Lock(ctx); err != nil {
					errs <- fmt.Errorf("lock: %w", err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				v := counter.Load()
				time.Sleep(time.Millisecond)
				counter.Store(v + 1)
				inside.Add(-1)
				if err := m.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("unlock: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	if got := counter.Load(); got != goroutines*rounds {
		t.Fatalf("counter = %d; want %d (lost updates)", got, goroutines*rounds)
	}
}

// Case 4: fencing tokens strictly increase across successive holders.
func (s *suite) fencing(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key, other := s.key(t, "k"), s.key(t, "other")
	ttl := s.h.ttl()
	ctx := ctxFor(t, 2*time.Minute)
	var last dlock.Token
	take := func(l *dlock.Locker, k string, opts ...dlock.Option) *dlock.Mutex {
		t.Helper()
		m := mustMutex(t, l, k, opts...)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		return m
	}
	check := func(m *dlock.Mutex, what string) {
		t.Helper()
		tok := m.Token()
		if tok <= last {
			t.Fatalf("%s: token %d is not greater than the previous holder's %d", what, tok, last)
		}
		last = tok
	}
	for i, l := range []*dlock.Locker{l1, l2, l1, l1, l2} {
		m := take(l, key, dlock.WithTTL(s.h.longTTL()))
		check(m, fmt.Sprintf("holder %d", i))
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	// Other keys are independent: holding one does not block the other,
	// and using it does not disturb the first key's sequence.
	a := take(l1, key, dlock.WithTTL(s.h.longTTL()))
	check(a, "holder before the other key")
	b := take(l2, other, dlock.WithTTL(s.h.longTTL()))
	if b.Token() == 0 {
		t.Fatal("other key: token 0")
	}
	_ = b.Unlock(ctx)
	_ = a.Unlock(ctx)
	// A takeover after expiry still gets a greater token.
	stale := take(l1, key, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	check(stale, "holder that will expire")
	next := take(l2, key, dlock.WithTTL(s.h.longTTL()))
	check(next, "holder after expiry")
	if err := stale.Unlock(ctx); err == nil {
		t.Fatal("Unlock by the expired holder succeeded")
	}
	_ = next.Unlock(ctx)
	after := take(l1, key, dlock.WithTTL(s.h.longTTL()))
	check(after, "holder after the takeover")
	_ = after.Unlock(ctx)
}

// Case 5: a holder that stops renewing loses the lock after its TTL, and can
// neither renew nor release the next holder's lock.
func (s *suite) expiry(t *testing.T) {
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.ttl()
	old := mustMutex(t, l1, key, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := old.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	oldDone, oldExpires, oldToken := old.Done(), old.Lease().Expires, old.Token()

	next := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	start := time.Now()
	if err := next.Lock(ctxFor(t, ttl+s.h.ExpiryGrace+slack)); err != nil {
		t.Fatalf("Lock by another Locker after the holder's TTL (%v, grace %v): %v", ttl, s.h.ExpiryGrace, err)
	}
	acquired := time.Now()
	t.Logf("taken over %v after the first hold", acquired.Sub(start))
	if acquired.Before(oldExpires) {
		t.Fatalf("new holder acquired %v before the old holder's validity ended", oldExpires.Sub(acquired))
	}
	if !isClosed(oldDone) {
		t.Fatal("old holder's Done() still open after another holder took the lock")
	}
	if next.Token() <= oldToken {
		t.Fatalf("new token %d not greater than the expired holder's %d", next.Token(), oldToken)
	}
	if err := old.Renew(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Renew by the expired holder: %v; want ErrLockLost", err)
	}
	if err := old.Unlock(ctxFor(t, 10*time.Second)); err == nil {
		t.Fatal("Unlock by the expired holder returned nil")
	}
	probe := mustMutex(t, l3, key)
	if err := probe.TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("after the expired holder's Unlock, TryLock: %v; want ErrNotAcquired (the new hold must survive)", err)
	}
	if err := next.Renew(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("new holder's Renew: %v", err)
	}
	if err := next.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("new holder's Unlock: %v", err)
	}
}

// Case 6: explicit Renew every driver.RenewInterval (TTL/3) keeps the lock
// for at least 3*TTL.
func (s *suite) renew(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.ttl()
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	token := m.Token()
	prev := m.Lease().Expires
	end := time.Now().Add(3 * ttl)
	for time.Now().Before(end) {
		time.Sleep(driver.RenewInterval(ttl))
		if err := m.Renew(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		exp := m.Lease().Expires
		if !exp.After(prev) {
			t.Fatalf("Renew did not move Expires forward: %v then %v", prev, exp)
		}
		prev = exp
	}
	if isClosed(m.Done()) {
		t.Fatal("Done() closed although every renewal succeeded")
	}
	if m.Token() != token {
		t.Fatalf("token changed on renewal: %d then %d", token, m.Token())
	}
	other := mustMutex(t, l2, key)
	if err := other.TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("after 3*TTL of renewals, TryLock by another Locker: %v; want ErrNotAcquired", err)
	}
	if err := m.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// Case 7: the watchdog keeps the lock for at least 3*TTL, and stops on Unlock.
func (s *suite) autoRenew(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.ttl()
	ctx := ctxFor(t, time.Minute)
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	other := mustMutex(t, l2, key)
	// Warm up both Lockers, so lazily started client goroutines and
	// connections count in the baseline.
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock by another Locker while held: %v; want ErrNotAcquired", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	base := runtime.NumGoroutine()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	first := m.Lease().Expires
	end := time.Now().Add(3*ttl + s.h.ExpiryGrace)
	for time.Now().Before(end) {
		time.Sleep(ttl / 4)
		if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("while auto-renewed, TryLock by another Locker: %v; want ErrNotAcquired", err)
		}
	}
	if isClosed(m.Done()) {
		t.Fatal("auto-renewed hold reported lost")
	}
	if !m.Lease().Expires.After(first) {
		t.Fatal("auto-renew never moved Expires forward")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	waitGoroutines(t, base, "after Unlock of an auto-renewed hold")
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	_ = other.Unlock(ctx)
}

// waitGoroutines waits until no more than base goroutines run.
func waitGoroutines(t testing.TB, base int, when string) {
	t.Helper()
	deadline := time.Now().Add(slack)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%s: %d goroutines, want at most %d:\n%s", when, n, base, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Case 8: Lock honours its context, and a waiter that gives up leaves
// nothing behind.
func (s *suite) context(t *testing.T) {
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	holder := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	if err := holder.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	waiter := mustMutex(t, l2, key, dlock.WithTTL(ttl))

	overrun, err := waitShort(false, waiter.Lock)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline: %v; want context.DeadlineExceeded", err)
	}
	if errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Lock past its deadline on a held key: %v; the backend answered, so not ErrUnavailable", err)
	}
	if overrun > slack {
		t.Fatalf("Lock returned %v after its deadline", overrun)
	}

	overrun, err = waitShort(true, waiter.Lock)
	if !errors.Is(err, context.Canceled) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Lock after cancel: %v; want context.Canceled (and not ErrUnavailable)", err)
	}
	if overrun > slack {
		t.Fatalf("Lock returned %v after its cancel", overrun)
	}
	if waiter.Token() != 0 {
		t.Fatal("a waiter whose context ended reports a token")
	}

	// Nothing left behind: once the holder unlocks, one attempt succeeds.
	if err := holder.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	fresh := mustMutex(t, l3, key, dlock.WithTTL(ttl))
	if err := fresh.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TryLock after the cancelled waiters and the holder left: %v (a waiter left something behind)", err)
	}
	_ = fresh.Unlock(ctxFor(t, 10*time.Second))

	// An already-ended context: no attempt, no hold.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	m := mustMutex(t, l2, key, dlock.WithTTL(ttl))
	start := time.Now()
	if err := m.Lock(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled context: %v; want context.Canceled", err)
	}
	if err := m.TryLock(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock with a cancelled context: %v; want context.Canceled", err)
	}
	if el := time.Since(start); el > slack {
		t.Fatalf("Lock with a cancelled context took %v", el)
	}
	if m.Token() != 0 {
		t.Fatal("Lock with a cancelled context acquired")
	}
	if err := fresh.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("key not free after a Lock with a cancelled context: %v", err)
	}
	_ = fresh.Unlock(ctxFor(t, 10*time.Second))
}

// Case 9: a waiter is woken by the release, not by the lease running out.
func (s *suite) handoff(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	holder := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	if err := holder.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	waiter := mustMutex(t, l2, key, dlock.WithTTL(ttl))
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(ctxFor(t, ttl/2)) }()
	time.Sleep(500 * time.Millisecond) // let the waiter block
	select {
	case err := <-got:
		t.Fatalf("waiter returned while the lock was held: %v", err)
	default:
	}
	released := time.Now()
	if err := holder.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter did not get the lock within TTL/2 = %v of the release (it must not wait for expiry): %v", ttl/2, err)
	}
	t.Logf("handoff took %v", time.Since(released))
	_ = waiter.Unlock(ctxFor(t, 10*time.Second))
}

// Case 10: keys are validated, and odd keys are distinct locks.
func (s *suite) keys(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	if _, err := l1.NewMutex(""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewMutex(\"\"): %v; want ErrInvalidKey", err)
	}
	if _, err := l1.NewMutex(strings.Repeat("x", driver.MaxKeyLen+1)); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewMutex(over-long key): %v; want ErrInvalidKey", err)
	}
	base := s.key(t, "")
	odd := []string{
		"a/b", "a_b", "a%2Fb", "a%2fb", "a-b", "a.b", "a:b", "a\\b", "a//b", "a/", "/a",
		"with space", "with+plus", "ключ-鍵-🔒", strings.Repeat("k", 1024),
		".", "..", "*", "?x=1", "#frag", "\x00nul", "\ttab",
	}
	ctx := ctxFor(t, 2*time.Minute)
	var held []*dlock.Mutex
	for _, k := range odd {
		m := mustMutex(t, l1, base+k, dlock.WithTTL(s.h.longTTL()))
		// TryLock: a collision with an earlier key shows up as ErrNotAcquired.
		if err := m.TryLock(ctx); err != nil {
			t.Fatalf("TryLock(%q) while the other odd keys are held: %v", k, err)
		}
		held = append(held, m)
	}
	// Every one is a real lock: another Locker cannot take it.
	for _, m := range held {
		probe := mustMutex(t, l2, m.Key())
		if err := probe.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock(%q) through another Locker while held: %v; want ErrNotAcquired", m.Key(), err)
		}
	}
	for _, m := range held {
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", m.Key(), err)
		}
	}
	for _, m := range held {
		probe := mustMutex(t, l2, m.Key())
		if err := probe.TryLock(ctx); err != nil {
			t.Fatalf("TryLock(%q) after Unlock: %v", m.Key(), err)
		}
		_ = probe.Unlock(ctx)
	}
}

// Case 11: misuse gets a clear error, never a deadlock.
func (s *suite) misuse(t *testing.T) {
	l := s.locker(t)
	ctx := ctxFor(t, time.Minute)
	m := mustMutex(t, l, s.key(t, "k"), dlock.WithTTL(s.h.longTTL()))
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock before Lock: %v; want ErrNotHeld", err)
	}
	if err := m.Renew(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Renew before Lock: %v; want ErrNotHeld", err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	token := m.Token()
	relock, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.Lock(relock); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("Lock on a Mutex that holds: %v; want ErrAlreadyHeld", err)
	}
	if err := m.TryLock(relock); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("TryLock on a Mutex that holds: %v; want ErrAlreadyHeld", err)
	}
	if m.Token() != token {
		t.Fatal("a refused re-Lock changed the hold")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v; want ErrNotHeld", err)
	}
	if err := m.Renew(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Renew after Unlock: %v; want ErrNotHeld", err)
	}
	for _, bad := range []time.Duration{0, -time.Second} {
		if _, err := l.NewMutex("k", dlock.WithTTL(bad)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("NewMutex with TTL %v: %v; want ErrInvalidOption", bad, err)
		}
	}
}

// Case 12: Close releases what the Locker holds; afterwards every call
// returns ErrClosed.
func (s *suite) close(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1 := s.locker(t)
	l2 := s.locker(t)
	key := s.key(t, "k")
	m := mustMutex(t, l1, key, dlock.WithTTL(s.h.longTTL()))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	done := m.Done()
	if err := l1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isClosed(done) {
		t.Fatal("Done() open after Close")
	}
	other := mustMutex(t, l2, key)
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the holder's Locker closed: %v (Close must release)", err)
	}
	_ = other.Unlock(ctx)
	if err := m.Lock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock after Close: %v; want ErrClosed", err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock after Close: %v; want ErrClosed", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Unlock after Close: %v; want ErrClosed", err)
	}
	if _, err := l1.NewMutex(key); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("NewMutex after Close: %v; want ErrClosed", err)
	}
	if err := l1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// Case 13: an unreachable server is reported, in time, and never as a
// lock. Open fails with ErrUnavailable when no server (or no quorum)
// answers; a Locker over a client made for such a server reports
// ErrUnavailable on Lock and TryLock.
func (s *suite) unavailable(t *testing.T) {
	addr := SilentServer(t)
	const wait = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	l, err := s.h.Unreachable(ctx, addr)
	if err == nil {
		_ = l.Close()
		t.Fatal("opening a Locker on an unreachable server succeeded; want ErrUnavailable")
	}
	if !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("opening a Locker on an unreachable server: %v; want ErrUnavailable", err)
	}
	if el := time.Since(start); el > wait+slack {
		t.Fatalf("open took %v with a %v deadline", el, wait)
	}
	if s.h.UnreachableClient == nil {
		return
	}
	l, err = s.h.UnreachableClient(ctx, addr)
	if err != nil {
		if !errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("a Locker over a client of an unreachable server: %v; want a Locker, or ErrUnavailable", err)
		}
		return
	}
	t.Cleanup(func() { _ = l.Close() })
	m := mustMutex(t, l, s.key(t, "k"))
	for name, call := range map[string]func(context.Context) error{"Lock": m.Lock, "TryLock": m.TryLock} {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		start := time.Now()
		err := call(ctx)
		cancel()
		if !errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("%s on an unreachable server: %v; want ErrUnavailable", name, err)
		}
		if el := time.Since(start); el > wait+slack {
			t.Fatalf("%s returned %v after a %v deadline", name, el, wait)
		}
		if m.Token() != 0 {
			t.Fatalf("%s on an unreachable server reports a hold", name)
		}
	}
}

// Case 14: a lease broken from outside closes Done and cancels the
// run-under-lock context.
func (s *suite) brokenLease(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.ttl()
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	var (
		token   dlock.Token
		noticed time.Time
		broken  time.Time
	)
	err := dlock.Do(ctxFor(t, time.Minute), m, func(ctx context.Context) error {
		token = m.Token()
		broken = time.Now()
		if err := s.h.BreakLease(ctxFor(t, 10*time.Second), key); err != nil {
			return fmt.Errorf("BreakLease: %w", err)
		}
		select {
		case <-ctx.Done():
			noticed = time.Now()
			if !errors.Is(context.Cause(ctx), dlock.ErrLockLost) {
				return fmt.Errorf("run-under-lock context cause %v; want ErrLockLost", context.Cause(ctx))
			}
			return ctx.Err()
		case <-time.After(ttl + s.h.ExpiryGrace + slack):
			return errors.New("run-under-lock context not cancelled after the lease was broken")
		}
	})
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Do with a broken lease: %v; want an error matching ErrLockLost", err)
	}
	if noticed.IsZero() {
		t.Fatalf("loss not noticed: %v", err)
	}
	t.Logf("loss noticed %v after the break", noticed.Sub(broken))
	if !isClosed(m.Done()) {
		t.Fatal("Done() open after the lease was broken")
	}
	next := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	if err := next.Lock(ctxFor(t, ttl+s.h.ExpiryGrace+slack)); err != nil {
		t.Fatalf("Lock after the broken lease: %v", err)
	}
	if next.Token() <= token {
		t.Fatalf("token after the broken lease %d; want greater than %d", next.Token(), token)
	}
	_ = next.Unlock(ctxFor(t, 10*time.Second))
}

// Case 15: many keys at once; nothing stays held, no goroutine leaks.
func (s *suite) manyKeys(t *testing.T) {
	const n = 1000
	ctx := ctxFor(t, 5*time.Minute)
	// Warm up lazily started client goroutines, then take the baseline.
	warm := s.locker(t)
	wm := mustMutex(t, warm, s.key(t, "warm"))
	if err := wm.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	_ = wm.Unlock(ctx)
	_ = warm.Close()
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()

	l, err := s.h.NewLocker(ctx, dlock.WithTTL(s.h.longTTL()))
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	probeL, err := s.h.NewLocker(ctx)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	ms := make([]*dlock.Mutex, n)
	for i := range ms {
		ms[i] = mustMutex(t, l, s.key(t, fmt.Sprintf("%04d", i)))
	}
	run := func(what string, f func(*dlock.Mutex) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(m); err != nil {
					errs <- fmt.Errorf("%s %q: %w", what, m.Key(), err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	run("Lock", func(m *dlock.Mutex) error { return m.Lock(ctx) })
	for i := 0; i < n; i += 97 {
		p := mustMutex(t, probeL, ms[i].Key())
		if err := p.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			// Say whether the holder still held: two holders, or a
			// hold that was lost first (and why).
			t.Fatalf("TryLock(%q) while held: %v; want ErrNotAcquired (the holder's Err: %v, lease %v left)",
				ms[i].Key(), err, ms[i].Err(), time.Until(ms[i].Lease().Expires).Round(time.Millisecond))
		}
	}
	run("Unlock", func(m *dlock.Mutex) error { return m.Unlock(ctx) })
	for _, m := range ms {
		p := mustMutex(t, probeL, m.Key())
		if err := p.TryLock(ctx); err != nil {
			t.Fatalf("TryLock(%q) after Unlock: %v (still held)", m.Key(), err)
		}
		if err := p.Unlock(ctx); err != nil {
			t.Fatalf("Unlock(%q): %v", m.Key(), err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := probeL.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitGoroutines(t, base, "after Close")
}
