package dlockotel_test

import (
	"context"
	"github.com/dlock-go/dlock/observe"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
)

// recorder is an Observer that keeps the figures the instruments record,
// as the instruments see them, to check each one's bucket.
type recorder struct {
	mu                           sync.Mutex
	wait, hold, renewDur, margin []float64
}

func (r *recorder) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }

func (r *recorder) Step(context.Context, observe.Call, observe.Step) {}

func (r *recorder) End(_ context.Context, c observe.Call, res observe.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch c.Op {
	case observe.OpLock, observe.OpTryLock:
		r.wait = append(r.wait, res.Duration.Seconds())
	case observe.OpRenew:
		r.renewDur = append(r.renewDur, res.Duration.Seconds())
		if res.Outcome == observe.OutcomeRenewed {
			r.margin = append(r.margin, res.Margin.Seconds())
		}
	}
}

func (r *recorder) HoldEnd(e observe.HoldEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold = append(r.hold, e.Held.Seconds())
}

// buckets returns a histogram's bounds and its bucket counts summed over
// its data points (every point of an instrument has the same bounds).
func buckets(t *testing.T, ms map[string]metricdata.Metrics, name string) (bounds []float64, counts []uint64) {
	t.Helper()
	h, ok := ms[name].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) == 0 {
		t.Fatalf("%s: no histogram data (%T)", name, ms[name].Data)
	}
	bounds = h.DataPoints[0].Bounds
	counts = make([]uint64, len(bounds)+1)
	for _, p := range h.DataPoints {
		for i, n := range p.BucketCounts {
			counts[i] += n
		}
	}
	return bounds, counts
}

// checkBuckets checks that each figure recorded lands in its bucket of
// bounds (upper bounds inclusive, as explicit-bucket histograms count),
// and returns how many buckets hold any.
func checkBuckets(t *testing.T, name string, bounds []float64, counts []uint64, values []float64) int {
	t.Helper()
	want := make([]uint64, len(bounds)+1)
	for _, v := range values {
		i := 0
		for i < len(bounds) && v > bounds[i] {
			i++
		}
		want[i]++
	}
	used := 0
	for i := range want {
		if counts[i] != want[i] {
			t.Errorf("%s: bucket counts %v over bounds %v; want %v for the figures %v", name, counts, bounds, want, values)
			break
		}
	}
	for _, n := range counts {
		if n > 0 {
			used++
		}
	}
	return used
}

// The histograms advise buckets that fit their figures, so that an SDK with
// its defaults (a ManualReader, no View) spreads real waits, holds,
// renewals and margins over several buckets rather than putting all of
// them in the first of the SDK's millisecond-scale ones (0 to 5 "seconds").
func TestBucketsFitWithoutView(t *testing.T) {
	e := newEnv(t)
	rec := &recorder{}
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	store := memory.NewStore()
	opts := []dlock.Option{dlock.WithObserver(e.obs), dlock.WithObserver(rec), dlock.WithTTL(ttl)}
	l1, err := memory.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := memory.New(store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := l1.NewMutex("k")
	b, _ := l2.NewMutex("k")

	// Short holds, each taken at once (waits of microseconds).
	for _, d := range []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond} {
		if err := a.TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := a.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A hold the watchdog renews (every TTL/3), and a Lock that waits all
	// through it.
	const long = 400 * time.Millisecond
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	time.Sleep(long)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Every event is reported once the Lockers are closed.
	_ = l1.Close()
	_ = l2.Close()

	ms := e.collect(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.margin) == 0 {
		t.Fatalf("no renewal in a hold of %v with a TTL of %v", long, ttl)
	}

	bounds, counts := buckets(t, ms, "dlock.lock.wait.duration")
	if bounds[0] > 0.001 || bounds[len(bounds)-1] < 300 {
		t.Errorf("wait buckets %v: want 1 ms or less to 5 minutes or more", bounds)
	}
	// Microseconds and 400 ms apart: two buckets at least.
	if n := checkBuckets(t, "wait", bounds, counts, rec.wait); n < 2 {
		t.Errorf("waits of %v fell in %d bucket of %v", rec.wait, n, bounds)
	}

	bounds, counts = buckets(t, ms, "dlock.lock.hold.duration")
	if bounds[0] > 0.01 || bounds[len(bounds)-1] < 3600 {
		t.Errorf("hold buckets %v: want 10 ms or less to an hour or more", bounds)
	}
	if n := checkBuckets(t, "hold", bounds, counts, rec.hold); n < 2 {
		t.Errorf("holds of %v fell in %d bucket of %v", rec.hold, n, bounds)
	}

	bounds, counts = buckets(t, ms, "dlock.lock.renewal.duration")
	if bounds[0] > 0.001 || bounds[len(bounds)-1] < 10 {
		t.Errorf("renewal buckets %v: want 1 ms or less to 10 s or more", bounds)
	}
	checkBuckets(t, "renewal", bounds, counts, rec.renewDur)

	// A margin is never more than the TTL: it must land in a bucket that
	// tells 300 ms from nothing, below the default lease's 30 s.
	bounds, counts = buckets(t, ms, "dlock.lock.renewal.margin")
	checkBuckets(t, "margin", bounds, counts, rec.margin)
	for i, n := range counts {
		if n > 0 && (i == len(bounds) || bounds[i] > 2*ttl.Seconds()) {
			t.Errorf("margins of %v (TTL %v) in bucket %d of %v: want a bucket below %v", rec.margin, ttl, i, bounds, 2*ttl)
		}
	}
	if bounds[len(bounds)-1] < dlock.DefaultTTL.Seconds() {
		t.Errorf("margin buckets %v end below the default TTL %v", bounds, dlock.DefaultTTL)
	}
}
