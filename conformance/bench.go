package conformance

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// RunBenchmarks measures a backend with the same Harness as Run:
//
//   - Uncontended: Lock+Unlock of one key, one goroutine.
//   - ParallelKeys: Lock+Unlock, every goroutine on its own key.
//   - Contended: 8 goroutines over 2 Lockers on one key, each holding for
//     about 1ms. It reports handoff latency (from the holder starting
//     Unlock to the next holder's Lock returning) as the custom metrics
//     handoff-p50-ms and handoff-p99-ms, and acquisitions per second.
//   - RWMutexRead, RWMutexWrite: RLock+RUnlock and Lock+Unlock of a
//     read-write lock of 4 readers, uncontended, beside Uncontended's
//     Mutex (docs/rwmutex.md, Cost).
func RunBenchmarks(b *testing.B, h Harness) {
	s := &suite{h: h, run: randomID()}
	b.Run("Uncontended", s.benchUncontended)
	b.Run("ParallelKeys", s.benchParallelKeys)
	b.Run("Contended", s.benchContended)
	b.Run("RWMutexRead", func(b *testing.B) { s.benchRW(b, true) })
	b.Run("RWMutexWrite", func(b *testing.B) { s.benchRW(b, false) })
}

func (s *suite) benchRW(b *testing.B, read bool) {
	ctx := context.Background()
	rw := mustRW(b, s.benchLocker(b), s.key(b, "rw"), 4)
	lock, unlock := rw.Lock, rw.Unlock
	if read {
		lock, unlock = rw.RLock, rw.RUnlock
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func (s *suite) benchLocker(b *testing.B) *dlock.Locker {
	b.Helper()
	l, err := s.h.NewLocker(context.Background(), dlock.WithTTL(s.h.longTTL()))
	if err != nil {
		b.Fatalf("NewLocker: %v", err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

func (s *suite) benchUncontended(b *testing.B) {
	ctx := context.Background()
	m := mustMutex(b, s.benchLocker(b), s.key(b, "k"))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func (s *suite) benchParallelKeys(b *testing.B) {
	ctx := context.Background()
	l := s.benchLocker(b)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := mustMutex(b, l, s.key(b, fmt.Sprint(next.Add(1))))
		for pb.Next() {
			if err := m.Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := m.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func (s *suite) benchContended(b *testing.B) {
	const goroutines = 8
	ls := []*dlock.Locker{s.benchLocker(b), s.benchLocker(b)}
	key := s.key(b, "k")
	cs := make([]Contender, goroutines)
	for g := range cs {
		m := mustMutex(b, ls[g%len(ls)], key)
		cs[g] = Contender{Lock: m.Lock, Unlock: m.Unlock}
	}
	Contend(b, time.Millisecond, cs)
}
