package postgres

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rtTracer counts round trips to the server: a query, or a batch.
type rtTracer struct{ n *atomic.Int64 }

func (r rtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (rtTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r rtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (rtTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (rtTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// The round trips of an uncontended read and write of a dlock.RWMutex
// with n readers, beside a Mutex's Lock+Unlock (docs/rwmutex.md, Cost):
// one per backend operation, N+5 and N+3.
func TestRWMutexRoundTrips(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(e.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	cfg.ConnConfig.Tracer = rtTracer{n}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	l, err := New(ctx, pool, Config{Table: e.table}, dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const rounds = 20
	measure := func(lock, unlock func(context.Context) error) float64 {
		t.Helper()
		for i := 0; i <= rounds; i++ {
			if i == 1 {
				n.Store(0) // the first round prepares statements
			}
			if err := lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return float64(n.Load()) / rounds
	}
	m, err := l.NewMutex("rw-cost-mutex")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Mutex Lock+Unlock: %.2f round trips", measure(m.Lock, m.Unlock))
	for _, readers := range []int{1, 4, 16} {
		rw, err := l.NewRWMutex("rw-cost-"+strconv.Itoa(readers), readers)
		if err != nil {
			t.Fatal(err)
		}
		read := measure(rw.RLock, rw.RUnlock)
		write := measure(rw.Lock, rw.Unlock)
		t.Logf("readers=%d: RLock+RUnlock %.2f, Lock+Unlock %.2f round trips", readers, read, write)
		if want := float64(readers + 5); read > want {
			t.Errorf("readers=%d: RLock+RUnlock took %.2f round trips; want at most %v", readers, read, want)
		}
		if want := float64(readers + 3); write > want {
			t.Errorf("readers=%d: Lock+Unlock took %.2f round trips; want at most %v", readers, write, want)
		}
	}
}
