package zookeeper

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

// A burst of acquisitions on one Locker must not cost it the holds it has:
// ZooKeeper answers a session's requests in order, and the heartbeat that
// vouches for the session queued behind thousands of creates, listings and
// reads went unanswered for longer than half the session timeout, so the
// hold was given up (and, with more, the grants could not confirm the
// session and the Locks failed). The gate (maxInFlight) keeps the queue
// short: every Lock of the burst is granted, and the hold taken before it
// is still held, also as another Locker sees it.
func TestBurstKeepsHolds(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=4s")
	_, l := lockerOn(t, raw)
	_, other := lockerOn(t, raw)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := time.Now().UnixNano()
	held, err := l.NewMutex(fmt.Sprintf("burst/%d/held", run))
	if err != nil {
		t.Fatal(err)
	}
	lockNow(t, held)
	const n = 5000
	var (
		wg     sync.WaitGroup
		failed atomic.Int64
		first  atomic.Value
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := l.NewMutex(fmt.Sprintf("burst/%d/%d", run, i))
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
	probe, err := other.NewMutex(held.Key())
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
