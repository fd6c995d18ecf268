package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
)

// probeUntil tries to take keys, each alone and then all as a set, from
// other until the instant until, and fails if any attempt returned holding
// its lock before until: the holder's window was still open. It pauses a
// few milliseconds between rounds.
func probeUntil(t *testing.T, other *dlock.Locker, until time.Time, what string, keys ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	set, err := other.NewMultiMutex(keys)
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]*dlock.Mutex, len(keys))
	for i, k := range keys {
		if ms[i], err = other.NewMutex(k); err != nil {
			t.Fatal(err)
		}
	}
	for rounds := 0; time.Now().Before(until); rounds++ {
		for i, m := range ms {
			if err := m.TryLock(ctx); err == nil {
				at := time.Now()
				_ = m.Unlock(ctx)
				if at.Before(until) {
					t.Fatalf("%s: key %q taken by another Locker %v before the holder's Lease().Expires (round %d)", what, keys[i], until.Sub(at), rounds)
				}
				return
			} else if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("%s: TryLock %q: %v", what, keys[i], err)
			}
		}
		if err := set.TryLock(ctx); err == nil {
			at := time.Now()
			_ = set.Unlock(ctx)
			if at.Before(until) {
				t.Fatalf("%s: the whole set taken by another Locker %v before the holder's Lease().Expires", what, until.Sub(at))
			}
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitTaken fails unless other can lock every key within d: the keys are
// given back once the windows have passed.
func waitTaken(t *testing.T, other *dlock.Locker, d time.Duration, keys ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	set, err := other.NewMultiMutex(keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Lock(ctx); err != nil {
		t.Fatalf("the keys were not given back after the holder's window: %v", err)
	}
	_ = set.Unlock(context.Background())
}

// A MultiMutex whose lease runs out (auto-renew off) closes Done at the
// loss margin but keeps every key, the lost ones included, until its
// Lease().Expires has passed, as a Mutex keeps its key; the keys are free
// after that.
func TestMultiMutexLossKeepsWindow(t *testing.T) {
	st := memory.NewStore()
	l, err := memory.New(st)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, _ := memory.New(st)
	defer other.Close()
	ctx := context.Background()
	ttl := time.Second
	keys := []string{"a", "b", "c"}
	mm, err := l.NewMultiMutex(keys, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := mm.Lease()
	select {
	case <-mm.Done():
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("Done still open after the lease ran out")
	}
	if !errors.Is(mm.Err(), dlock.ErrLeaseExpired) {
		t.Fatalf("Err %v; want ErrLeaseExpired", mm.Err())
	}
	probeUntil(t, other, lease.Expires, "lease ran out", keys...)
	waitTaken(t, other, ttl+5*time.Second, keys...)
}

// The same when renewals fail, and when one key is broken from outside:
// the keys still held stay held until the set's window has passed.
func TestMultiMutexRenewalFailureKeepsWindow(t *testing.T) {
	st := memory.NewStore()
	f, l := newFaulty(t, st)
	other, _ := memory.New(st)
	defer other.Close()
	ctx := context.Background()
	ttl := time.Second
	keys := []string{"a", "b", "c"}
	mm, err := l.NewMultiMutex(keys, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lease := mm.Lease()
	f.failRenew.Store(true)
	select {
	case <-mm.Done():
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("Done still open after renewals failed")
	}
	if !errors.Is(mm.Err(), dlock.ErrRenewalFailed) {
		t.Fatalf("Err %v; want ErrRenewalFailed", mm.Err())
	}
	probeUntil(t, other, lease.Expires, "renewals failing", keys...)
	waitTaken(t, other, ttl+5*time.Second, keys...)
	f.failRenew.Store(false)

	// One key broken: the set ends at once, the others stay held until
	// the set's window, as last reported, has passed.
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lease = mm.Lease()
	if !st.Break("b") {
		t.Fatal("b not held")
	}
	select {
	case <-mm.Done():
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("Done still open after a key was broken")
	}
	probeUntil(t, other, lease.Expires, "one key broken", "a", "c")
	waitTaken(t, other, ttl+5*time.Second, keys...)
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the loss: %v; want ErrLockLost", err)
	}
}

// Unlock after a loss gives every key back at once, without waiting for
// the window (the holder has stopped acting), as Mutex.Unlock does.
func TestMultiMutexUnlockAfterLossReleases(t *testing.T) {
	st := memory.NewStore()
	l, _ := memory.New(st)
	defer l.Close()
	other, _ := memory.New(st)
	defer other.Close()
	ctx := context.Background()
	keys := []string{"a", "b"}
	mm, err := l.NewMultiMutex(keys, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.Break("a") {
		t.Fatal("a not held")
	}
	<-mm.Done()
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the loss: %v; want ErrLockLost", err)
	}
	b, _ := other.NewMutex("b")
	if err := b.TryLock(ctx); err != nil {
		t.Fatalf("b after Unlock of the lost set: %v; want free", err)
	}
	_ = b.Unlock(ctx)
	// And a new Lock after a loss does not wait for the window either.
	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.Break("a") {
		t.Fatal("a not held")
	}
	<-mm.Done()
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := mm.Lock(lctx); err != nil {
		t.Fatalf("Lock after a loss: %v", err)
	}
	_ = mm.Unlock(ctx)
}
