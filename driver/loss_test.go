package driver_test

import (
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLossMarkClosesAndCalls(t *testing.T) {
	var l driver.Loss
	ch := l.Chan()
	var wg sync.WaitGroup
	wg.Add(2)
	calls := make(chan int, 3)
	l.OnLost(func() { calls <- 1; wg.Done() })
	l.OnLost(func() { calls <- 2; wg.Done() })
	stopped := l.OnLost(func() { calls <- 3 })
	if !stopped() {
		t.Fatal("stop before Mark reported that f had started")
	}
	if stopped() {
		t.Fatal("a second stop reported stopping f again")
	}
	if closed(ch) || l.Marked() {
		t.Fatal("Lost closed before Mark")
	}
	if !l.Mark() {
		t.Fatal("first Mark reported it did nothing")
	}
	if l.Mark() {
		t.Fatal("second Mark reported it marked again")
	}
	if !closed(ch) || !closed(l.Chan()) || !l.Marked() {
		t.Fatal("Lost not closed after Mark")
	}
	wg.Wait()
	close(calls)
	got := map[int]bool{}
	for c := range calls {
		got[c] = true
	}
	if !got[1] || !got[2] || got[3] || len(got) != 2 {
		t.Fatalf("callbacks run: %v; want 1 and 2, not the stopped 3", got)
	}
}

func TestLossAfterMark(t *testing.T) {
	var l driver.Loss
	l.Mark()
	if !closed(l.Chan()) {
		t.Fatal("Chan of a Loss marked before Chan was called is open")
	}
	called := make(chan struct{})
	stop := l.OnLost(func() { close(called) })
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("OnLost after Mark did not call f")
	}
	if stop() {
		t.Fatal("stop after f started reported it stopped f")
	}
}

func TestLossStopAfterMark(t *testing.T) {
	var l driver.Loss
	called := make(chan struct{})
	stop := l.OnLost(func() { close(called) })
	l.Mark()
	if stop() {
		t.Fatal("stop after Mark reported it stopped f")
	}
	<-called
}

// Mark, OnLost and stop from many goroutines: every callback that was not
// stopped runs exactly once.
func TestLossConcurrent(t *testing.T) {
	for range 50 {
		var l driver.Loss
		var mu sync.Mutex
		ran := map[int]int{}
		var kept sync.WaitGroup
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			kept.Add(1)
			go func() {
				defer wg.Done()
				stop := l.OnLost(func() {
					mu.Lock()
					ran[i]++
					mu.Unlock()
					kept.Done()
				})
				if i%2 == 0 && stop() {
					kept.Done()
				}
			}()
		}
		wg.Add(1)
		go func() { defer wg.Done(); l.Mark() }()
		wg.Wait()
		kept.Wait()
		for i, n := range ran {
			if n != 1 {
				t.Fatalf("callback %d ran %d times", i, n)
			}
		}
	}
}

func BenchmarkLossHold(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		l := new(driver.Loss)
		_ = l.Chan()
		stop := l.OnLost(func() {})
		stop()
	}
}
