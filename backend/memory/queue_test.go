package memory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
)

// mutexes returns n Mutexes on key, each of a Locker of its own on s, as
// n processes sharing one server would have.
func mutexes(t *testing.T, s *memory.Store, key string, n int) []*dlock.Mutex {
	t.Helper()
	ms := make([]*dlock.Mutex, n)
	for i := range ms {
		l, err := memory.New(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		if ms[i], err = l.NewMutex(key); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// waitWaiters waits until Inspect reports n Locks waiting for key.
func waitWaiters(t *testing.T, m *dlock.Mutex, l *dlock.Locker, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := l.Inspect(context.Background(), m.Key())
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect: Waiters %d, want %d", info.Waiters, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestQueueOrder: Locks that queued one after the other behind a holder
// get the key in that order, and a TryLock made as the holder unlocks
// does not take it from the first of them.
func TestQueueOrder(t *testing.T) {
	ctx := context.Background()
	s := memory.NewStore()
	ms := mutexes(t, s, "order", 5) // holder, A, B, C, a newcomer
	inspector, err := memory.New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer inspector.Close()
	holder, newcomer := ms[0], ms[4]
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan int, 3)
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ms[i].Lock(ctx); err != nil {
				t.Error(err)
				return
			}
			got <- i
		}()
		waitWaiters(t, ms[i], inspector, i) // i is in line before i+1 comes
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := newcomer.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock as the holder unlocked, with three Locks waiting: %v, want ErrNotAcquired", err)
	}
	for want := 1; want <= 3; want++ {
		i := <-got
		if i != want {
			t.Fatalf("waiter %d got the key, want waiter %d (queued first)", i, want)
		}
		if err := ms[i].Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

// TestNoStarvation: workers that each Lock, hold for a moment and Unlock
// in a loop all get the key, and about as often: the worker that just
// unlocked does not take the key back ahead of those waiting. (The hold
// only gives the others time to queue; nothing here is timed.)
func TestNoStarvation(t *testing.T) {
	const workers, total = 8, 400
	ctx := context.Background()
	ms := mutexes(t, memory.NewStore(), "fair", workers)
	var (
		mu     sync.Mutex
		counts [workers]int
		n      int
		wg     sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := ms[w].Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				done := n >= total
				if !done {
					n++
					counts[w]++
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				if err := ms[w].Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
				if done {
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
	t.Logf("acquisitions per worker: %v", counts)
	if lo == 0 || float64(hi) > 1.5*float64(lo) {
		t.Fatalf("acquisitions per worker %v: most/fewest %d/%d, want every worker > 0 and at most 1.5", counts, hi, lo)
	}
}
