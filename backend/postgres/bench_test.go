package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

// BenchmarkConformance is the suite's benchmarks: uncontended Lock+Unlock,
// parallel distinct keys, contended handoff (8 goroutines over 2 Lockers).
func BenchmarkConformance(b *testing.B) {
	conformance.RunBenchmarks(b, newEnv(b).harness())
}

// BenchmarkLockUnlock compares an uncontended Lock+Unlock through dlock,
// through this driver alone (TryAcquire+Release, without the portable
// layer), and the bare advisory lock (pg_advisory_lock and
// pg_advisory_unlock on one pooled connection: two round trips, no lease,
// no token), rotated in one loop so that a load change on a shared machine
// hits all alike. It reports each one's time and the bare lock's
// throughput as a fraction of dlock's (ratio) and of the driver's
// (driver-ratio).
func BenchmarkLockUnlock(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	m := mustMutex(b, e.locker(b, dlock.WithTTL(30*time.Second)), "bench")
	d := e.driver(b)
	pool, err := pgxpool.New(ctx, e.endpoint)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	dl := func(b *testing.B) {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	drv := func(b *testing.B) {
		h, err := d.TryAcquire(ctx, driver.Request{Key: "bench/driver", TTL: 30 * time.Second, Owner: owner()})
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Release(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
	bare := func(b *testing.B) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Release()
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock(4242)`); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
			b.Fatal(err)
		}
	}
	var td, tr, tb time.Duration
	runs := []struct {
		f   func(*testing.B)
		sum *time.Duration
	}{{dl, &td}, {drv, &tr}, {bare, &tb}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range runs {
			r := runs[(i+j)%len(runs)]
			t0 := time.Now()
			r.f(b)
			*r.sum += time.Since(t0)
		}
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(us(td), "dlock-us/op")
	b.ReportMetric(us(tr), "driver-us/op")
	b.ReportMetric(us(tb), "bare-us/op")
	b.ReportMetric(float64(tb)/float64(td), "ratio")
	b.ReportMetric(float64(tb)/float64(tr), "driver-ratio")
}
