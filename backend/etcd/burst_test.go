package etcd_test

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

// A burst of acquisitions on one Locker must not cost it the holds it
// has, nor fail the acquisitions: every write goes through the one Raft
// log, and a keepalive of the shared lease counts only once a consensus
// response confirms it. Without a bound on the operations in flight
// (maxInFlight), 5,000 Locks at once kept the lease unconfirmed past its
// TTL: the hold taken before the burst was given up and most Locks failed.
// Every Lock of the burst must be granted and released, and the earlier
// hold must still be held, also as another Locker sees it.
func TestBurstKeepsHolds(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	l := e.mustLocker(t)
	other := e.mustLocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := time.Now().UnixNano()
	held, err := l.NewMutex(fmt.Sprintf("burst/%d/held", run))
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
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
