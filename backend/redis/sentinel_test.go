package redis

import (
	"context"
	"testing"
	"time"
)

// redis+sentinel:// finds the primary through a Sentinel and locks there.
func TestSentinel(t *testing.T) {
	primary := startTempServer(t)
	sentinel := startSentinel(t, primary)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := openMutex(ctx, t, "redis+sentinel://"+sentinel.addr()+"?master_name=mymaster&prefix=s", "k")
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock through the Sentinel: %v", err)
	}
	if n := primary.client().Exists(ctx, LockKey("s", "k")).Val(); n != 1 {
		t.Fatal("the lock is not on the primary the Sentinel monitors")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
