package etcd_test

import (
	"context"
	"sort"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
)

// BenchmarkVsConcurrency compares dlock's etcd backend with etcd's own
// concurrency.Mutex, in one run against the same server (DLOCK_ETCD_URL):
//
//   - Uncontended: Lock+Unlock of one key by one goroutine; interleaved
//     alternates short rounds of both and reports the median of each and
//     their ratio, which a busy machine disturbs less.
//   - Contended: 8 goroutines over 2 clients on one key, each holding for
//     about 1ms; reports acquisitions per second and handoff latency.
//
// concurrency.Mutex runs on long-lived Sessions (one per goroutine, as a
// Session can hold one entry per key), as its documentation suggests.
func BenchmarkVsConcurrency(b *testing.B) {
	e := newEnv(b, "DLOCK_ETCD_URL")
	b.Run("Uncontended/dlock", func(b *testing.B) {
		m, _ := e.mustLocker(b).NewMutex("uncontended-dlock")
		benchUncontended(b, m.Lock, m.Unlock)
	})
	b.Run("Uncontended/concurrency", func(b *testing.B) {
		m := concurrency.NewMutex(e.session(b, e.client(b)), e.prefix+"uncontended-concurrency")
		benchUncontended(b, m.Lock, m.Unlock)
	})
	b.Run("Uncontended/interleaved", func(b *testing.B) {
		m, _ := e.mustLocker(b).NewMutex("interleaved-dlock")
		cm := concurrency.NewMutex(e.session(b, e.client(b)), e.prefix+"interleaved-concurrency")
		benchInterleaved(b, [2][2]func(context.Context) error{{m.Lock, m.Unlock}, {cm.Lock, cm.Unlock}})
	})
	b.Run("Contended/dlock", func(b *testing.B) {
		ls := []*dlock.Locker{e.mustLocker(b), e.mustLocker(b)}
		benchContended(b, func(g int) (lock, unlock func(context.Context) error) {
			m, _ := ls[g%2].NewMutex("contended-dlock")
			return m.Lock, m.Unlock
		})
	})
	b.Run("Contended/concurrency", func(b *testing.B) {
		clis := []*clientv3.Client{e.client(b), e.client(b)}
		benchContended(b, func(g int) (lock, unlock func(context.Context) error) {
			m := concurrency.NewMutex(e.session(b, clis[g%2]), e.prefix+"contended-concurrency")
			return m.Lock, m.Unlock
		})
	})
}

func (e *env) session(b *testing.B, cli *clientv3.Client) *concurrency.Session {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(dlock.DefaultTTL/time.Second)))
	if err != nil {
		b.Fatalf("NewSession: %v", err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchUncontended(b *testing.B, lock, unlock func(context.Context) error) {
	ctx := context.Background()
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

// benchInterleaved alternates rounds of 20 Lock+Unlock of dlock and of
// concurrency.Mutex, so that both see the same load on a shared machine,
// and reports the median round of each (per operation) and their ratio.
func benchInterleaved(b *testing.B, fns [2][2]func(context.Context) error) {
	const round = 20
	ctx := context.Background()
	var rounds [2][]time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += 2 * round {
		for i, f := range fns {
			start := time.Now()
			for j := 0; j < round; j++ {
				if err := f[0](ctx); err != nil {
					b.Fatal(err)
				}
				if err := f[1](ctx); err != nil {
					b.Fatal(err)
				}
			}
			rounds[i] = append(rounds[i], time.Since(start)/round)
		}
	}
	b.StopTimer()
	var med [2]float64
	for i, r := range rounds {
		sort.Slice(r, func(x, y int) bool { return r[x] < r[y] })
		med[i] = float64(r[len(r)/2].Microseconds())
	}
	b.ReportMetric(med[0], "dlock-us/op")
	b.ReportMetric(med[1], "concurrency-us/op")
	b.ReportMetric(med[0]/med[1], "ratio")
}

// BenchmarkGuardedDelete measures what the guard on a release costs etcd:
// Release deletes its entry in a transaction that compares the entry's
// create revision, where concurrency.Mutex's Unlock sends a plain Delete.
// Entries are named by their lease, which a Locker's next Lock of the key
// reuses, so an unguarded delete sent again after a timeout could remove
// that later entry. Each iteration puts a key on a lease and deletes it,
// alternating the two deletes, and the median of each is reported with
// their difference (guard-us/op), which the uncontended comparison with
// concurrency.Mutex pays on every Unlock:
//
//	go test -run '^$' -bench GuardedDelete ./backend/etcd/
func BenchmarkGuardedDelete(b *testing.B) {
	e := newEnv(b, "DLOCK_ETCD_URL")
	cli := e.client(b)
	ctx := context.Background()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		b.Fatal(err)
	}
	key := e.prefix + "guarded-delete"
	put := func(b *testing.B) int64 {
		r, err := cli.Put(ctx, key, "v", clientv3.WithLease(lease.ID))
		if err != nil {
			b.Fatal(err)
		}
		return r.Header.Revision
	}
	conformance.BenchAlternate(b, [2]string{"plain", "guarded"}, "guard", func(b *testing.B) {
		put(b)
		resp, err := cli.Delete(ctx, key)
		if err != nil || resp.Deleted != 1 {
			b.Fatalf("Delete: %v, deleted %v", err, resp)
		}
	}, func(b *testing.B) {
		rev := put(b)
		resp, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil || !resp.Succeeded {
			b.Fatalf("guarded delete: %v, %v", err, resp)
		}
	})
}

// benchContended runs b.N acquisitions over 8 goroutines; mutex(g) returns
// goroutine g's lock and unlock.
func benchContended(b *testing.B, mutex func(g int) (lock, unlock func(context.Context) error)) {
	cs := make([]conformance.Contender, 8)
	for g := range cs {
		cs[g].Lock, cs[g].Unlock = mutex(g)
	}
	conformance.Contend(b, time.Millisecond, cs)
}
