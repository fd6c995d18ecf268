package dlock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// A gate taken with nobody waiting is only marked taken; the second caller
// makes its channel, and waiters then enter in the order they came.
func TestGateUncontendedThenFIFO(t *testing.T) {
	g := gates{m: map[string]*gate{}}
	ctx := context.Background()
	first, err := g.enter(ctx, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.ch != nil || !first.taken {
		t.Fatalf("uncontended gate: ch=%v taken=%v; want no channel, taken", first.ch, first.taken)
	}
	if _, ok := g.tryEnter("k"); ok {
		t.Fatal("tryEnter took a taken gate")
	}
	order := make(chan int, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gt, err := g.enter(ctx, "k", nil)
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			g.leave("k", gt)
		}()
		// Let waiter i block before waiter i+1 comes.
		for deadline := time.Now().Add(10 * time.Second); ; {
			g.mu.Lock()
			refs := g.m["k"].refs
			g.mu.Unlock()
			if refs == i+2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	g.leave("k", first)
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d entered %dth; want FIFO", got, want)
		}
		want++
	}
	if len(g.m) != 0 {
		t.Fatalf("gates left after every caller left: %v", g.m)
	}
}

// A waiter whose context ends leaves the gate as it was.
func TestGateWaiterGivesUp(t *testing.T) {
	g := gates{m: map[string]*gate{}}
	held, _ := g.enter(context.Background(), "k", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := g.enter(ctx, "k", nil); err != context.DeadlineExceeded {
		t.Fatalf("enter on a taken gate: %v; want DeadlineExceeded", err)
	}
	closed := make(chan struct{})
	close(closed)
	if _, err := g.enter(context.Background(), "k", closed); err != ErrClosed {
		t.Fatalf("enter with the Locker closed: %v; want ErrClosed", err)
	}
	g.leave("k", held)
	gt, ok := g.tryEnter("k")
	if !ok {
		t.Fatal("gate still taken after its taker left")
	}
	g.leave("k", gt)
	if len(g.m) != 0 {
		t.Fatalf("gates left: %v", g.m)
	}
}

// Many callers, some giving up: the gate never lets two in at once.
func TestGateExclusion(t *testing.T) {
	g := gates{m: map[string]*gate{}}
	var inside, entered int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				var gt *gate
				var err error
				switch {
				case (i+j)%3 == 0:
					var ok bool
					if gt, ok = g.tryEnter("k"); !ok {
						continue
					}
				case (i+j)%5 == 0:
					ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
					gt, err = g.enter(ctx, "k", nil)
					cancel()
					if err != nil {
						continue
					}
				default:
					if gt, err = g.enter(context.Background(), "k", nil); err != nil {
						t.Error(err)
						return
					}
				}
				mu.Lock()
				inside++
				entered++
				if inside != 1 {
					t.Errorf("%d callers inside the gate", inside)
				}
				mu.Unlock()
				mu.Lock()
				inside--
				mu.Unlock()
				g.leave("k", gt)
			}
		}()
	}
	wg.Wait()
	if entered == 0 || len(g.m) != 0 {
		t.Fatalf("entered %d times, gates left %v", entered, g.m)
	}
}
