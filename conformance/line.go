package conformance

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// The line cases: on a backend that keeps waiting Locks in a queue
// (Harness.Queue), Locks that queued one after the other get the key in
// that order, a TryLock made as the holder unlocks does not take it from
// the first of them, and workers that Lock, hold a moment and Unlock in a
// loop all get the key about as often. On every backend, every waiter gets
// the key in the end and no worker starves.

func (s *suite) lineCases() []namedCase {
	return []namedCase{
		{"LineOrder", s.lineOrder},
		{"LineFairness", s.lineFairness},
	}
}

// waitWaiters waits until Inspect through l reports n Locks waiting for
// key (Harness.Queue backends only).
func waitWaiters(t *testing.T, ctx context.Context, l *dlock.Locker, key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(slack + 5*time.Second); ; {
		info, err := l.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
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

// LineOrder: three Locks, each of a Locker of its own (as three processes
// would have), queue one after the other behind a holder. On a queue
// backend they get the key in the order they queued, and a TryLock made
// as the holder unlocks is refused (the key is the first waiter's, who has
// yet to take it). Elsewhere each of them gets the key once.
func (s *suite) lineOrder(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	ms := make([]*dlock.Mutex, 5) // holder, three waiters, a newcomer
	for i := range ms {
		ms[i] = mustMutex(t, s.locker(t), key, dlock.WithTTL(ttl))
	}
	inspector := s.locker(t)
	holder, newcomer := ms[0], ms[4]
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	got := make(chan int, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx) // a failure ends the waits
	defer cancel()
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ms[i].Lock(ctx); err != nil {
				t.Errorf("waiter %d: Lock: %v", i, err)
				got <- -i
				return
			}
			got <- i
		}()
		if s.h.Queue {
			waitWaiters(t, ctx, inspector, key, i) // i is in line before i+1 comes
		}
	}
	if !s.h.Queue {
		time.Sleep(100 * time.Millisecond) // give them time to start waiting; nothing is timed
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if s.h.Queue {
		err := newcomer.TryLock(ctx)
		if err == nil {
			_ = newcomer.Unlock(ctx)
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock as the holder unlocked, with three Locks waiting: %v; want ErrNotAcquired", err)
		}
	}
	seen := map[int]bool{}
	for want := 1; want <= 3; want++ {
		i := <-got
		if i < 0 {
			t.FailNow()
		}
		if s.h.Queue && i != want {
			t.Fatalf("waiter %d got the key, want waiter %d (queued first)", i, want)
		}
		if seen[i] {
			t.Fatalf("waiter %d got the key twice", i)
		}
		seen[i] = true
		if err := ms[i].Unlock(ctx); err != nil {
			t.Fatalf("waiter %d: Unlock: %v", i, err)
		}
	}
}

// LineFairness: eight workers, each with a Locker of its own, Lock, hold
// for a moment and Unlock in a loop until 240 acquisitions are made. No
// worker gets none, no two hold at once, and on a queue backend the most
// and the fewest acquisitions of one worker are at most 1.5 apart: the
// worker that just unlocked does not take the key back ahead of those
// waiting. (The hold only gives the others time to queue; nothing here is
// timed.)
func (s *suite) lineFairness(t *testing.T) {
	const workers, total = 8, 240
	ctx := ctxFor(t, 5*time.Minute)
	key := s.key(t, "k")
	ttl := s.h.longTTL()
	ms := make([]*dlock.Mutex, workers)
	for i := range ms {
		ms[i] = mustMutex(t, s.locker(t), key, dlock.WithTTL(ttl))
	}
	var (
		mu      sync.Mutex
		counts  [workers]int
		n       int
		holding int
		wg      sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if err := ms[w].Lock(ctx); err != nil {
					t.Errorf("worker %d: Lock: %v", w, err)
					return
				}
				mu.Lock()
				holding++
				overlap := holding > 1
				done := n >= total
				if !done {
					n++
					counts[w]++
				}
				mu.Unlock()
				if overlap {
					t.Errorf("worker %d holds the key while another worker does", w)
				}
				time.Sleep(time.Millisecond)
				mu.Lock()
				holding--
				mu.Unlock()
				if err := ms[w].Unlock(ctx); err != nil {
					t.Errorf("worker %d: Unlock: %v", w, err)
					return
				}
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	lo, hi := counts[0], counts[0]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if lo == 0 {
		t.Fatalf("acquisitions per worker %v: a worker got none", counts)
	}
	if s.h.Queue && float64(hi) > 1.5*float64(lo) {
		t.Fatalf("acquisitions per worker %v: most/fewest %d/%d; want at most 1.5 on a backend that queues its waiters", counts, hi, lo)
	}
}
