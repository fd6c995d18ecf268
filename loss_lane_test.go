package dlock_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// stalledStore wraps the memory driver as a store that has stopped
// answering: once stalled, every renewal call is held until its context
// ends, as on a partition or a paused server. It counts the renewal calls
// in flight.
type stalledStore struct {
	driver.Locker
	stalled  atomic.Bool
	inFlight atomic.Int64
	maxIn    atomic.Int64
}

func (s *stalledStore) stall(ctx context.Context) error {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxIn.Load(); n > m && !s.maxIn.CompareAndSwap(m, n); m = s.maxIn.Load() {
	}
	<-ctx.Done()
	return driver.Unavailable(ctx.Err())
}

func (s *stalledStore) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	if s.stalled.Load() {
		return 0, s.stall(ctx)
	}
	return s.Locker.Renew(ctx, h)
}

// stalledBatchStore is a stalledStore that renews in batches.
type stalledBatchStore struct{ *stalledStore }

func (s stalledBatchStore) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	if s.stalled.Load() {
		err := s.stall(ctx)
		errs := make([]error, len(hs))
		for i := range errs {
			errs[i] = err
		}
		return make([]time.Duration, len(hs)), errs
	}
	return s.Locker.(driver.BatchRenewer).RenewBatch(ctx, hs)
}

// Done closes before the lease can end on the server however many renewal
// calls a stalled store keeps in flight: the loss of a hold never waits
// behind a driver call. Many holds of TTLs from 4 to 5.9 s, on one Locker,
// the store stalled: at each hold's Expires its Done (taken once, right
// after Lock, so that nothing reads the clock for it) must be closed: the
// loss margin (a tenth of the TTL) is then 400 to 590 ms, ample for a
// loaded machine. With the losses queued behind the stalled renewals,
// hundreds were still open.
func TestLossDoesNotWaitBehindStalledRenewals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		holds int
		batch bool
	}{
		// More holds than renewal workers of either kind, so that renewal
		// calls wait for a worker and the losses for them.
		{"batched", 1500, true},
		{"single", 2500, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &stalledStore{Locker: memory.NewStore().Driver()}
			var d driver.Locker = st
			if tc.batch {
				d = stalledBatchStore{st}
			}
			l, err := dlock.NewLocker(d)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			type held struct {
				m       *dlock.Mutex
				done    <-chan struct{}
				ttl     time.Duration
				expires time.Time
			}
			hs := make([]held, tc.holds)
			ctx := context.Background()
			for i := range hs {
				ttl := 4*time.Second + time.Duration(i%20)*100*time.Millisecond
				m, err := l.NewMutex("stalled/"+strconv.Itoa(i), dlock.WithTTL(ttl))
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				hs[i] = held{m: m, done: m.Done(), ttl: ttl, expires: m.Lease().Expires}
			}
			st.stalled.Store(true)
			slices.SortFunc(hs, func(a, b held) int { return a.expires.Compare(b.expires) })
			var late []string
			for _, h := range hs {
				time.Sleep(time.Until(h.expires))
				select {
				case <-h.done:
				default:
					late = append(late, fmt.Sprintf("%s (TTL %v)", h.m.Key(), h.ttl))
				}
			}
			if len(late) > 0 {
				t.Errorf("%d of %d holds had Done open at their Expires, the store stalled; first: %v",
					len(late), len(hs), late[0])
			}
			limit := int64(32)
			if !tc.batch {
				limit = 1024
			}
			if m := st.maxIn.Load(); m > limit || m == 0 {
				t.Errorf("%d renewal calls in flight at most; want between 1 and %d", m, limit)
			}
			var wg sync.WaitGroup
			for _, h := range hs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = h.m.Unlock(ctx)
				}()
			}
			wg.Wait()
		})
	}
}
