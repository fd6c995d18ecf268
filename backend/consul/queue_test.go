package consul

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// lineLength returns how many tickets stand in key's line.
func lineLength(ctx context.Context, t *testing.T, d *consulDriver, key string) int {
	t.Helper()
	pairs, _, err := d.c.KV().List(d.queuePrefix(d.path(key)), d.qopts(ctx))
	if err != nil {
		t.Fatalf("list the line: %v", err)
	}
	return len(pairs)
}

// waitLine waits until key's line has n tickets.
func waitLine(ctx context.Context, t *testing.T, d *consulDriver, key string, n int) {
	t.Helper()
	for lineLength(ctx, t, d, key) != n {
		if ctx.Err() != nil {
			t.Fatalf("the line never reached %d tickets", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func inspector(ctx context.Context, t *testing.T) *consulDriver {
	t.Helper()
	d, err := open(ctx, testURL(t, endpoint(t), ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d.(*consulDriver)
}

// Waiters of different Lockers (as different processes would be) that
// fell in line one after the other get the lock in that order, however
// quick each is to retry; and the line is empty once all are done.
func TestLineGrantsInOrder(t *testing.T) {
	ctx := ctxFor(t, 60*time.Second)
	d := inspector(ctx, t)
	key := testKey(t, "k")
	const waiters = 5
	holder, err := testLocker(t, "lockdelay=0s").NewMutex(key, dlock.WithTTL(MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range waiters {
		m, err := testLocker(t, "lockdelay=0s").NewMutex(key, dlock.WithTTL(MinTTL))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter %d: Lock: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: Unlock: %v", i, err)
			}
		}()
		waitLine(ctx, t, d, key, i+1) // i is in line before i+1 starts
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("granted in order %v, want 0..%d", order, waiters-1)
		}
	}
	waitLine(ctx, t, d, key, 0)
}

// Contending Lockers, each its own client as separate processes would be,
// each get a fair share: after a fixed number of acquisitions in all,
// every worker has some, and none has more than half again as many as
// the least served (issue 45's bound). Counted, never timed.
func TestLineStarvesNoWorker(t *testing.T) {
	ctx := ctxFor(t, 120*time.Second)
	key := testKey(t, "k")
	const (
		workers = 16
		total   = 480
	)
	var (
		mu     sync.Mutex
		counts [workers]int
		done   int
		wg     sync.WaitGroup
	)
	for i := range workers {
		m, err := testLocker(t, "lockdelay=0s").NewMutex(key, dlock.WithTTL(MinTTL))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("worker %d: Lock: %v", i, err)
					return
				}
				mu.Lock()
				stop := done >= total
				if !stop {
					counts[i]++
					done++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("worker %d: Unlock: %v", i, err)
					return
				}
				if stop {
					return
				}
			}
		}()
	}
	wg.Wait()
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if lo == 0 || float64(hi) > 1.5*float64(lo) {
		t.Fatalf("acquisitions per worker %v: want every one > 0 and max/min <= 1.5", counts)
	}
	t.Log(fmt.Sprint("acquisitions per worker ", counts))
}

// A Lock that gives up while in line leaves no ticket behind.
func TestLineLeftOnCancel(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	d := inspector(ctx, t)
	key := testKey(t, "k")
	holder, err := testLocker(t, "lockdelay=0s").NewMutex(key, dlock.WithTTL(MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	m, err := testLocker(t, "lockdelay=0s").NewMutex(key, dlock.WithTTL(MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- m.Lock(wctx) }()
	waitLine(ctx, t, d, key, 1)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Lock succeeded with the key held")
	}
	waitLine(ctx, t, d, key, 0)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
