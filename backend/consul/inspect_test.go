package consul

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A hold without a monitor learns of a Break at its next renewal, and
// Break starts no lock-delay: the next TryLock, right after it, succeeds
// although the Locker's lock-delay is long.
func TestBreakUnmonitored(t *testing.T) {
	raw := endpoint(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	openL := func(params string) *dlock.Locker {
		d, err := open(ctx, testURL(t, raw, params))
		if err != nil {
			t.Fatal(err)
		}
		l, err := dlock.NewLocker(d, dlock.WithOwner("unmonitored"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	holder, op := openL("monitors=0&lockdelay=60s"), openL("lockdelay=60s")
	key := "break-unmonitored/" + time.Now().Format(time.RFC3339Nano)
	ttl := 10 * time.Second
	m, err := holder.NewMutex(key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := op.Break(ctx, key)
	if err != nil || !info.Held || info.Token != m.Token() || info.Owner != "unmonitored" {
		t.Fatalf("Break: %+v, %v; want the hold with token %d", info, err, m.Token())
	}
	next, err := op.NewMutex(key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := next.TryLock(ctx); err != nil {
		t.Fatalf("TryLock right after Break: %v (a lock-delay?)", err)
	}
	defer func() { _ = next.Unlock(ctx) }()
	if next.Token() <= info.Token {
		t.Fatalf("token after Break %d; want above %d", next.Token(), info.Token)
	}
	broken := time.Now()
	select {
	case <-m.Done():
		t.Logf("unmonitored holder noticed the break after %v", time.Since(broken))
	case <-time.After(ttl + 30*time.Second): // a hang bound: renewal is every driver.RenewInterval
		t.Fatal("unmonitored holder's Done still open after Break")
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("Err() = %v; want ErrLockLost", m.Err())
	}
}
