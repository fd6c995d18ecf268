package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// redis+sentinel:// finds the primary through a Sentinel and locks there.
func TestSentinel(t *testing.T) {
	primary := startTempServer(t)
	sentinel := startSentinel(t, primary)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := "redis+sentinel://" + sentinel.addr() + "?master_name=mymaster&prefix=s"
	m := openMutex(ctx, t, raw, "k", dlock.WithOwner("through the sentinel"))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock through the Sentinel: %v", err)
	}
	if n := primary.client().Exists(ctx, LockKey("s", "k")).Val(); n != 1 {
		t.Fatal("the lock is not on the primary the Sentinel monitors")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// Inspect and Break through the Sentinel.
	op, err := openLocker(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock through the Sentinel: %v", err)
	}
	info, err := op.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Token != m.Token() || info.Owner != "through the sentinel" {
		t.Fatalf("Inspect through the Sentinel: %+v, %v; want held with token %d", info, err, m.Token())
	}
	if info, err := op.Break(ctx, "k"); err != nil || !info.Held {
		t.Fatalf("Break through the Sentinel: %+v, %v", info, err)
	}
	select {
	case <-m.Done():
	case <-time.After(time.Minute):
		t.Fatal("broken holder's Done still open")
	}
	if !errors.Is(m.Err(), dlock.ErrLockLost) {
		t.Fatalf("broken holder's Err %v; want ErrLockLost", m.Err())
	}
	next := openMutex(ctx, t, raw, "k")
	if err := next.Lock(ctx); err != nil || next.Token() <= info.Token {
		t.Fatalf("Lock after Break: %v, token %d; want above %d", err, next.Token(), info.Token)
	}
}
