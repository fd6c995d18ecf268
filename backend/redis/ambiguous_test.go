package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// An acquire whose reply never comes (the server stalls after receiving
// it) leaves no lock behind, even when the server runs it later.
func TestAmbiguousAcquireLeavesNothing(t *testing.T) {
	srv := startTempServer(t)
	admin := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := openMutex(ctx, t, srv.url()+"?prefix=amb", "k")
	// Warm up: a pooled connection, the script cached on the server.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	n := keyNames("amb", "k")

	srv.pause()
	tctx, tcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := m.TryLock(tctx)
	tcancel()
	time.Sleep(200 * time.Millisecond)
	srv.resume()
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock on a stalled server: %v; want a timeout", err)
	}
	if m.Token() != 0 {
		t.Fatal("a timed-out TryLock reports a hold")
	}
	// The server ran the request after it resumed (the counter moved);
	// the cleanup must remove the lock it made.
	deadline := time.Now().Add(10 * time.Second)
	for {
		fence, _ := strconv.ParseUint(admin.Get(ctx, n.fence).Val(), 10, 64)
		exists := admin.Exists(ctx, n.lock).Val()
		if fence > uint64(before) && exists == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the stall: counter %d (before %d), lock key exists=%d; want the acquire applied and undone",
				fence, before, exists)
		}
		time.Sleep(20 * time.Millisecond)
	}
	other := openMutex(ctx, t, srv.url()+"?prefix=amb", "k")
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the cleanup: %v", err)
	}
	_ = other.Unlock(ctx)
}
