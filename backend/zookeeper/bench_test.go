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

type dlockHandle struct{ m *dlock.Mutex }

func (h dlockHandle) Lock() error   { return h.m.Lock(context.Background()) }
func (h dlockHandle) Unlock() error { return h.m.Unlock(context.Background()) }

// contenders makes the holders of one key for a benchmark: the i-th of n
// goroutines gets handles(i); there are two connections (Lockers) in all.
type contenders func(b *testing.B, key string) func(i int) benchLock

func dlockContenders(raw string) contenders {
	return func(b *testing.B, key string) func(int) benchLock {
		ls := make([]*dlock.Locker, 2)
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

// BenchmarkTokenRead measures what the fencing token costs a Lock on
// ZooKeeper: go-zookeeper's Create does not return the create's zxid, so
// the node's czxid (the token) takes an exists request on the new node,
// which dlock sends with a watch (the loss signal) alongside the listing
// that zk.Lock sends alone. Each iteration creates an ephemeral sequential
// node, lists its parent, and deletes the node, alternately without and
// with that exists, and reports the median of each and their difference
// (token-us/op):
//
//	go test -run '^$' -bench TokenRead ./backend/zookeeper/
func BenchmarkTokenRead(b *testing.B) {
	conn := admin(b, endpoint(b, "DLOCK_ZK_URL", ""))
	parent := fmt.Sprintf("%s-tokenread-%d", testPrefix, time.Now().UnixNano())
	if _, err := conn.Create(parent, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Delete(parent, -1) })
	data := []byte("0123456789abcdef0123456789abcdef\n")
	// cycle creates a node, lists its parent (with exists on the node,
	// sent alongside, when token is set) and deletes the node.
	cycle := func(b *testing.B, token bool) {
		path, err := conn.Create(parent+"/lock-", data, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
		if err != nil {
			b.Fatal(err)
		}
		var own chan error
		if token {
			own = make(chan error, 1)
			go func() {
				ok, st, _, err := conn.ExistsW(path)
				if err == nil && (!ok || st.Czxid <= 0) {
					err = fmt.Errorf("own node %s: exists %v, czxid %d", path, ok, st.Czxid)
				}
				own <- err
			}()
		}
		if _, _, err := conn.Children(parent); err != nil {
			b.Fatal(err)
		}
		if own != nil {
			if err := <-own; err != nil {
				b.Fatal(err)
			}
		}
		if err := conn.Delete(path, -1); err != nil {
			b.Fatal(err)
		}
	}
	conformance.BenchAlternate(b, [2]string{"listing", "with-exists"}, "token",
		func(b *testing.B) { cycle(b, false) }, func(b *testing.B) { cycle(b, true) })
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
