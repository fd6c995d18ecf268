package zookeeper

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
)

// benchLock is one holder's handle, dlock's or go-zookeeper's.
type benchLock interface {
	Lock() error
	Unlock() error
}

type dlockHandle struct{ m dlock.Mutex }

func (h dlockHandle) Lock() error   { return h.m.Lock(context.Background()) }
func (h dlockHandle) Unlock() error { return h.m.Unlock(context.Background()) }

// contenders makes the holders of one key for a benchmark: the i-th of n
// goroutines gets handles(i); there are two connections (Lockers) in all.
type contenders func(b *testing.B, key string) func(i int) benchLock

func dlockContenders(raw string) contenders {
	return func(b *testing.B, key string) func(int) benchLock {
		ls := make([]dlock.Locker, 2)
		for i := range ls {
			l, err := openLocker(context.Background(), raw)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			ls[i] = l
		}
		return func(i int) benchLock {
			m, err := ls[i%len(ls)].NewMutex(key)
			if err != nil {
				b.Fatal(err)
			}
			return dlockHandle{m}
		}
	}
}

func zkLockContenders(raw string) contenders {
	return func(b *testing.B, key string) func(int) benchLock {
		conns := make([]*zk.Conn, 2)
		for i := range conns {
			conns[i] = admin(b, raw)
		}
		kp, err := KeyPath(testPrefix, key)
		if err != nil {
			b.Fatal(err)
		}
		return func(i int) benchLock { return zk.NewLock(conns[i%len(conns)], kp, zk.WorldACL(zk.PermAll)) }
	}
}

// BenchmarkVsZkLock measures dlock against go-zookeeper's own zk.Lock on
// the same server, in one run: Lock+Unlock of a free key, and the
// contended handoff of RunBenchmarks (8 goroutines over 2 connections,
// each holding about 1 ms).
func BenchmarkVsZkLock(b *testing.B) {
	raw := endpoint(b, "DLOCK_ZK_URL", "session_timeout=10s")
	impls := []struct {
		name string
		c    contenders
	}{{"dlock", dlockContenders(raw)}, {"zklock", zkLockContenders(raw)}}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	for _, im := range impls {
		b.Run("Uncontended/"+im.name, func(b *testing.B) {
			h := im.c(b, "bench/"+run+"/uncontended/"+im.name)(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := h.Lock(); err != nil {
					b.Fatal(err)
				}
				if err := h.Unlock(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// Both in turn, one Lock+Unlock each per iteration, so that the load
	// of a shared machine weighs on both alike.
	b.Run("Uncontended/paired", func(b *testing.B) {
		hs := make([]benchLock, len(impls))
		for i, im := range impls {
			hs[i] = im.c(b, "bench/"+run+"/paired/"+im.name)(0)
		}
		spent := make([]time.Duration, len(impls))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for j, h := range hs {
				start := time.Now()
				if err := h.Lock(); err != nil {
					b.Fatal(err)
				}
				if err := h.Unlock(); err != nil {
					b.Fatal(err)
				}
				spent[j] += time.Since(start)
			}
		}
		for j, im := range impls {
			b.ReportMetric(float64(spent[j].Nanoseconds())/float64(b.N), im.name+"-ns/op")
		}
		b.ReportMetric(float64(spent[0])/float64(spent[1]), "dlock/zklock")
	})
	for _, im := range impls {
		b.Run("Contended/"+im.name, func(b *testing.B) {
			benchContended(b, im.c(b, "bench/"+run+"/contended/"+im.name+fmt.Sprint(b.N)))
		})
	}
}

func benchContended(b *testing.B, handle func(int) benchLock) {
	cs := make([]conformance.Contender, 8)
	for g := range cs {
		h := handle(g)
		cs[g] = conformance.Contender{
			Lock:   func(context.Context) error { return h.Lock() },
			Unlock: func(context.Context) error { return h.Unlock() },
		}
	}
	conformance.Contend(b, time.Millisecond, cs)
}
