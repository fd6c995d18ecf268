package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// The Inspect and Break cases: what Locker.Inspect reports for a free, a
// held, a released and an expired key; what Locker.Break does to the
// holder and to the next one; and the errors for bad input.

// wantWaiters is what Info.Waiters must say when n requests are queued.
func (s *suite) wantWaiters(n int) int {
	if s.h.Queue {
		return n
	}
	return -1
}

// checkFree fails unless info describes a free key.
func (s *suite) checkFree(t *testing.T, what string, info dlock.Info) {
	t.Helper()
	if info.Held || info.Token != 0 || info.Owner != "" || info.Remaining != 0 {
		t.Fatalf("Inspect %s: %+v; want free (Held false, Token 0, no owner, Remaining 0)", what, info)
	}
	if info.Waiters != s.wantWaiters(0) {
		t.Fatalf("Inspect %s: Waiters %d; want %d", what, info.Waiters, s.wantWaiters(0))
	}
}

// checkHeld fails unless info describes m's hold with owner and ttl.
func checkHeld(t *testing.T, what string, info dlock.Info, m *dlock.Mutex, owner string, ttl time.Duration) {
	t.Helper()
	if !info.Held {
		t.Fatalf("Inspect %s: %+v; want Held", what, info)
	}
	if info.Token != m.Token() {
		t.Fatalf("Inspect %s: Token %d; want the holder's %d", what, info.Token, m.Token())
	}
	if info.Remaining <= 0 || info.Remaining > ttl {
		t.Fatalf("Inspect %s: Remaining %v; want in (0, %v]", what, info.Remaining, ttl)
	}
	if info.Owner != owner {
		t.Fatalf("Inspect %s: Owner %q; want %q", what, info.Owner, owner)
	}
}

// Inspect: free, held (token, lease left, owner, waiters), released.
func (s *suite) inspect(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	const owner = "host=conformance pid=1 prog=inspect ünïcode"
	l1, l2 := s.locker(t, dlock.WithOwner(owner)), s.locker(t)
	key := s.key(t, "k")
	if info, err := l2.Inspect(ctx, key); err != nil {
		t.Fatalf("Inspect a free key: %v", err)
	} else {
		s.checkFree(t, "a free key", info)
		if info.Key != key {
			t.Fatalf("Inspect: Key %q; want %q", info.Key, key)
		}
	}
	ttl := s.h.longTTL()
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	info, err := l2.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect a held key: %v", err)
	}
	checkHeld(t, "a held key", info, m, owner, ttl)
	if info.Waiters != s.wantWaiters(0) {
		t.Fatalf("Inspect a held key nobody waits for: Waiters %d; want %d", info.Waiters, s.wantWaiters(0))
	}
	// Inspect changes nothing: the holder still renews, others still
	// cannot take the key.
	if err := m.Renew(ctx); err != nil {
		t.Fatalf("Renew after Inspect: %v", err)
	}
	if err := mustMutex(t, l2, key).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock after Inspect: %v; want ErrNotAcquired", err)
	}
	// A per-Mutex owner overrides the Locker's; the default names the host.
	other := s.key(t, "other")
	m2 := mustMutex(t, l2, other, dlock.WithOwner("per-mutex"))
	if err := m2.Lock(ctx); err != nil {
		t.Fatalf("Lock %q: %v", other, err)
	}
	if info, err := l1.Inspect(ctx, other); err != nil || info.Owner != "per-mutex" {
		t.Fatalf("Inspect a key held WithOwner(\"per-mutex\"): %+v, %v", info, err)
	}
	_ = m2.Unlock(ctx)
	m3 := mustMutex(t, l2, other)
	if err := m3.Lock(ctx); err != nil {
		t.Fatalf("Lock %q: %v", other, err)
	}
	if info, err := l1.Inspect(ctx, other); err != nil || !strings.HasPrefix(info.Owner, "host=") || !strings.Contains(info.Owner, " pid=") {
		t.Fatalf("Inspect a key held with the default owner: %+v, %v; want host=... pid=... prog=...", info, err)
	}
	_ = m3.Unlock(ctx)

	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	info, err = l2.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect a released key: %v", err)
	}
	s.checkFree(t, "a released key", info)
	if info, err := l2.Break(ctx, key); err != nil || info.Held {
		t.Fatalf("Break a free key: %+v, %v; want not held and no error", info, err)
	}
}

// InspectQueue: on a queue backend Waiters counts the requests behind the
// holder; elsewhere it stays -1.
func (s *suite) inspectQueue(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	w := mustMutex(t, l2, key, dlock.WithTTL(ttl))
	go func() { waited <- w.Lock(wctx) }()
	want := s.wantWaiters(1)
	var info dlock.Info
	deadline := time.Now().Add(slack + 5*time.Second)
	for {
		var err error
		info, err = l3.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Waiters == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.Waiters != want {
		t.Fatalf("Inspect with one Lock waiting: Waiters %d; want %d", info.Waiters, want)
	}
	checkHeld(t, "a key with a waiter", info, m, info.Owner, ttl)
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Lock after cancel: %v; want context.Canceled", err)
	}
	// The cancelled waiter leaves the queue.
	deadline = time.Now().Add(slack + 5*time.Second)
	for {
		var err error
		info, err = l3.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Waiters == s.wantWaiters(0) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.Waiters != s.wantWaiters(0) {
		t.Fatalf("Inspect after the waiter gave up: Waiters %d; want %d", info.Waiters, s.wantWaiters(0))
	}
	_ = m.Unlock(ctx)
}

// InspectExpiry: a lease that ran out without renewal reads as free.
func (s *suite) inspectExpiry(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.ttl()
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	ctx := ctxFor(t, time.Minute)
	info, err := l2.Inspect(ctx, key)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	checkHeld(t, "a held key", info, m, info.Owner, ttl)
	// Poll until the server lets the lease go; bounded by TTL, the
	// backend's grace and slack (a hang bound).
	deadline := time.Now().Add(ttl + s.h.ExpiryGrace + slack)
	for info.Held && time.Now().Before(deadline) {
		time.Sleep(ttl / 10)
		if info, err = l2.Inspect(ctx, key); err != nil {
			t.Fatalf("Inspect: %v", err)
		}
	}
	s.checkFree(t, "a key whose lease expired", info)
	if !m.Lease().Expires.Before(time.Now()) {
		t.Fatalf("Inspect reported the key free before the holder's validity ended (%v)", m.Lease().Expires)
	}
}

// Break: the broken holder's Done closes within its renewal interval with
// ErrLockLost; the next holder's token is higher; on a queue backend the
// waiter is granted.
func (s *suite) breakHold(t *testing.T) {
	const owner = "to be broken"
	l1, l2, l3 := s.locker(t, dlock.WithOwner(owner)), s.locker(t), s.locker(t)
	key := s.key(t, "k")
	ttl := s.h.ttl()
	ctx := ctxFor(t, 2*time.Minute)
	m := mustMutex(t, l1, key, dlock.WithTTL(ttl)) // auto-renewed every driver.RenewInterval
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	token := m.Token()
	// A waiter queued behind the holder (on a queue backend it must stay
	// queued and be granted next).
	next := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	granted := make(chan error, 1)
	go func() { granted <- next.Lock(ctx) }()
	if s.h.Queue {
		deadline := time.Now().Add(slack + 5*time.Second)
		for {
			info, err := l3.Inspect(ctx, key)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if info.Waiters == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Inspect with one Lock waiting: Waiters %d; want 1", info.Waiters)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	broken := time.Now()
	info, err := l3.Break(ctx, key)
	if err != nil {
		t.Fatalf("Break: %v", err)
	}
	if !info.Held || info.Token != token || info.Owner != owner {
		t.Fatalf("Break returned %+v; want the broken hold (token %d, owner %q)", info, token, owner)
	}
	// The holder's next renewal, at most driver.RenewInterval away, finds the
	// lock gone.
	// The bound is generous: it catches a hang, not a slow renewal.
	select {
	case <-m.Done():
		t.Logf("holder noticed the break after %v", time.Since(broken))
	case <-time.After(ttl + s.h.ExpiryGrace + slack):
		t.Fatalf("broken holder's Done still open %v after Break", time.Since(broken))
	}
	if err := m.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("broken holder's Err() = %v; want ErrLockLost", err)
	}
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("Lock by the waiter after Break: %v", err)
		}
	case <-time.After(ttl + s.h.ExpiryGrace + 2*slack):
		t.Fatal("waiter not granted after Break")
	}
	if next.Token() <= token {
		t.Fatalf("token after Break %d; want greater than the broken holder's %d", next.Token(), token)
	}
	if info, err := l3.Inspect(ctx, key); err != nil || !info.Held || info.Token != next.Token() {
		t.Fatalf("Inspect after Break and a new Lock: %+v, %v; want held with token %d", info, err, next.Token())
	}
	if err := m.Unlock(ctx); err == nil {
		t.Fatal("Unlock by the broken holder returned nil")
	}
	if err := next.Renew(ctx); err != nil {
		t.Fatalf("new holder's Renew after the broken holder's Unlock: %v", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatalf("new holder's Unlock: %v", err)
	}

	// Without the watchdog, the holder's own next renewal finds the hold
	// gone.
	manual := mustMutex(t, l1, key, dlock.WithTTL(s.h.longTTL()), dlock.WithAutoRenew(false))
	if err := manual.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := l3.Break(ctx, key); err != nil {
		t.Fatalf("Break: %v", err)
	}
	if err := manual.Renew(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Renew after Break: %v; want ErrLockLost", err)
	}
	if !isClosed(manual.Done()) {
		t.Fatal("Done open after Renew reported the loss")
	}
}

// InspectErrors: bad keys and owners are typed errors; a closed Locker
// answers ErrClosed.
func (s *suite) inspectErrors(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l := s.locker(t)
	for _, op := range []struct {
		name string
		fn   func(context.Context, string) (dlock.Info, error)
	}{{"Inspect", l.Inspect}, {"Break", l.Break}} {
		if _, err := op.fn(ctx, ""); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Fatalf("%s(\"\"): %v; want ErrInvalidKey", op.name, err)
		}
		if _, err := op.fn(ctx, strings.Repeat("k", 4097)); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Fatalf("%s(4097-byte key): %v; want ErrInvalidKey", op.name, err)
		}
	}
	key := s.key(t, "k")
	for name, owner := range map[string]string{
		"1025 bytes":    strings.Repeat("o", 1025),
		"invalid UTF-8": "host=\xff\xfe",
	} {
		if _, err := l.NewMutex(key, dlock.WithOwner(owner)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("NewMutex WithOwner(%s): %v; want ErrInvalidOption", name, err)
		}
		bad, err := s.h.NewLocker(ctx, dlock.WithOwner(owner))
		if !errors.Is(err, dlock.ErrInvalidOption) {
			if bad != nil {
				_ = bad.Close()
			}
			t.Fatalf("NewLocker WithOwner(%s): %v; want ErrInvalidOption", name, err)
		}
	}
	// The longest owner is accepted and stored whole.
	longest := strings.Repeat("ö", 512)
	m := mustMutex(t, l, key, dlock.WithOwner(longest), dlock.WithTTL(s.h.longTTL()))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock WithOwner(1024 bytes): %v", err)
	}
	if info, err := s.locker(t).Inspect(ctx, key); err != nil || info.Owner != longest {
		t.Fatalf("Inspect a key held WithOwner(1024 bytes): owner of %d bytes, %v; want it whole", len(info.Owner), err)
	}
	_ = m.Unlock(ctx)
	closed := s.locker(t)
	if err := closed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := closed.Inspect(ctx, key); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Inspect on a closed Locker: %v; want ErrClosed", err)
	}
	if _, err := closed.Break(ctx, key); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Break on a closed Locker: %v; want ErrClosed", err)
	}
}
