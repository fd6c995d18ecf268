package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Contender is one goroutine's lock and unlock in a contended benchmark:
// a dlock Mutex, or a rival library's lock it is compared with.
type Contender struct {
	Lock, Unlock func(context.Context) error
}

// Contend runs b.N acquisitions shared by the contenders, one goroutine
// each, every holder keeping the lock for hold. It resets the timer when
// the goroutines start and stops it when the last ends, reports acq/s and
// the handoff percentiles (see Handoffs), fails b if two contenders ever
// hold at once, and returns how many acquisitions each contender made.
func Contend(b *testing.B, hold time.Duration, cs []Contender) []int {
	ctx := context.Background()
	var (
		remaining atomic.Int64
		inside    atomic.Int32
		handoffs  Handoffs
		wg        sync.WaitGroup
	)
	counts := make([]int, len(cs))
	remaining.Store(int64(b.N))
	b.ResetTimer()
	start := time.Now()
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for remaining.Add(-1) >= 0 {
				if err := c.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					b.Error("two holders at once")
				}
				handoffs.Acquired()
				counts[i]++
				time.Sleep(hold)
				inside.Add(-1)
				handoffs.Releasing()
				if err := c.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acq/s")
	handoffs.Report(b)
	return counts
}
