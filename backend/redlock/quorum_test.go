package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// TestSplitVote: the key is held by two other owners, neither with a
// majority (X on a and b, Y on c), and d and e are free. An attempt wins d
// and e only: it must fail, leave nothing on d and e, and report the wait
// until a majority can be free, which is Y's lease on c (the shortest),
// not X's. A waiting Lock then gets the lock when Y's lease ends, long
// before X's does.
func TestSplitVote(t *testing.T) {
	ep := endpoint(t)
	hosts := hostsOf(t, ep)
	prefix := testPrefix()
	l, err := dlock.NewLocker(openDriver(t, withParams(t, ep, "prefix", prefix, "timeout", "2s")), dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	admin := adminClients(t, hosts)
	const key = "split"
	lockKey := prefix + "l:" + key
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const yLease = 1500 * time.Millisecond
	for i, holder := range []string{"X", "X", "Y"} {
		ttl := time.Minute
		if holder == "Y" {
			ttl = yLease
		}
		if err := admin[i].Set(ctx, lockKey, holder, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set := time.Now()

	m, _ := l.NewMutex(key)
	if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with 2 of 5 free: %v; want ErrNotAcquired", err)
	}
	for _, c := range admin[3:] {
		if v, err := c.Get(ctx, lockKey).Result(); err == nil {
			t.Fatalf("the failed attempt left its lock (%q) on a free instance", v)
		}
	}

	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	defer func() { _ = m.Unlock(ctx) }()
	waited := time.Since(set)
	t.Logf("acquired %v after Y's %v lease was set", waited, yLease)
	if waited < yLease-10*time.Millisecond {
		t.Fatalf("acquired after %v, before Y's lease of %v ended", waited, yLease)
	}
	if waited > 30*time.Second {
		t.Fatalf("acquired after %v: waited for X's lease, not Y's", waited)
	}
	for i, c := range admin[:2] { // X still holds a and b
		if v, _ := c.Get(ctx, lockKey).Result(); v != "X" {
			t.Fatalf("instance %d: %q; want X's lock untouched", i, v)
		}
	}
}
