package conformance

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// maxTTL is the longest TTL the backend accepts: Harness.MaxTTL, within
// dlock.MaxTTL.
func (h Harness) maxTTL() time.Duration {
	if h.MaxTTL > 0 && h.MaxTTL < dlock.MaxTTL {
		return h.MaxTTL
	}
	return dlock.MaxTTL
}

// withParam returns u with one more query parameter.
func withParam(u, param string) string {
	if strings.Contains(u, "?") {
		return u + "&" + param
	}
	return u + "?" + param
}

// Case: a TTL longer than the backend's largest, up to
// time.Duration(math.MaxInt64) (a common way to write "forever"), is
// refused with ErrInvalidOption naming the limit, by NewMutex, NewLocker
// and Open's ttl parameter, never at Lock; the largest TTL accepted works
// and still excludes a second Locker, and its hold ends at Unlock.
func (s *suite) ttlLimit(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	limit := s.h.maxTTL()
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "k")
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, dlock.ErrInvalidOption) || !strings.Contains(err.Error(), limit.String()) {
			t.Errorf("%s: %v; want an error matching ErrInvalidOption that names the largest TTL, %v", what, err, limit)
		}
	}
	for _, ttl := range []time.Duration{limit + time.Nanosecond, limit + time.Hour, math.MaxInt64} {
		m, err := l1.NewMutex(key, dlock.WithTTL(ttl))
		if err == nil {
			t.Errorf("NewMutex with WithTTL(%v), above the largest TTL %v, succeeded; want ErrInvalidOption", ttl, limit)
			s.twoHolders(t, m, l2, key, ttl)
		} else {
			refused("NewMutex with WithTTL("+ttl.String()+")", err)
		}
		if l, err := s.h.NewLocker(ctx, dlock.WithTTL(ttl)); err == nil {
			_ = l.Close()
			t.Errorf("NewLocker with WithTTL(%v) succeeded; want ErrInvalidOption", ttl)
		} else {
			refused("NewLocker with WithTTL("+ttl.String()+")", err)
		}
		u := withParam(s.h.URL, "ttl="+ttl.String())
		if l, err := dlock.Open(ctx, u); err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded; want ErrInvalidOption", u)
		} else {
			refused("Open with ttl="+ttl.String(), err)
		}
	}
	if t.Failed() {
		return
	}

	// The largest TTL: accepted by Open and NewMutex, and one holder only.
	l, err := dlock.Open(ctx, withParam(s.h.URL, "ttl="+limit.String()))
	if err != nil {
		t.Fatalf("Open with ttl=%v, the largest TTL: %v", limit, err)
	}
	_ = l.Close()
	m := mustMutex(t, l1, key, dlock.WithTTL(limit))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock with the largest TTL, %v: %v", limit, err)
	}
	if exp := m.Lease().Expires; exp.Before(time.Now().Add(limit * 9 / 10)) {
		t.Errorf("Lease().Expires %v after a Lock with TTL %v; want about a whole TTL ahead", exp, limit)
	}
	other := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		if err == nil {
			_ = other.Unlock(ctx)
		}
		_ = m.Unlock(ctx)
		t.Fatalf("TryLock by another Locker while held with TTL %v: %v; want ErrNotAcquired (two holders)", limit, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of a hold with TTL %v: %v", limit, err)
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock by another Locker after Unlock of a hold with TTL %v: %v; want the key free", limit, err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// twoHolders reports what a Mutex made with a TTL that should have been
// refused does: whether it locks, and whether another Locker can then
// take the same key. It leaves the key free.
func (s *suite) twoHolders(t *testing.T, m *dlock.Mutex, l2 *dlock.Locker, key string, ttl time.Duration) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	if err := m.Lock(ctx); err != nil {
		t.Errorf("then Lock with TTL %v: %v", ttl, err)
		return
	}
	defer func() { _ = m.Unlock(ctx) }()
	other := mustMutex(t, l2, key, dlock.WithTTL(s.h.longTTL()))
	if err := other.TryLock(ctx); err == nil {
		_ = other.Unlock(ctx)
		t.Errorf("then Lock with TTL %v succeeded, and so did TryLock by another Locker on the same key: two holders", ttl)
	}
}
