package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// BurstKeepsHolds checks that a burst of n Locks at once through l costs l
// none of the holds it has: l takes a key, then n goroutines each Lock and
// Unlock a key of their own through l; every one must succeed, and the
// first hold must still be held afterwards, also as other (another Locker
// on the same store) sees it.
//
// What keeps a hold alive (a renewal, a heartbeat, a keepalive's
// confirmation) shares the client's connections, the server's queue of a
// session or the consensus log with the acquisitions; a driver that lets a
// burst queue all of them at once starves it, and the Locker gives up
// holds the store never took from it. ttl is
// the TTL of every hold; use the shortest the backend's figures in its doc
// stand behind.
func BurstKeepsHolds(t *testing.T, l, other *dlock.Locker, n int, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := time.Now().UnixNano()
	held, err := l.NewMutex(fmt.Sprintf("burst/%d/held", run), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Lock(ctx); err != nil {
		t.Fatalf("Lock before the burst: %v", err)
	}
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		first  atomic.Value
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := l.NewMutex(fmt.Sprintf("burst/%d/%d", run, i), dlock.WithTTL(ttl))
			if err == nil {
				if err = m.Lock(ctx); err == nil {
					err = m.Unlock(ctx)
				}
			}
			if err != nil && failed.Add(1) == 1 {
				first.Store(err)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d Lock+Unlock of the burst failed, the first with: %v", f, n, first.Load())
	}
	if err := held.Err(); err != nil {
		t.Fatalf("the hold taken before the burst was lost during it: %v", err)
	}
	probe, err := other.NewMutex(held.Key(), dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := probe.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another Locker's TryLock of the held key after the burst: %v; want ErrNotAcquired", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the hold after the burst: %v", err)
	}
}
