package dlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	dlockotel "github.com/dlock-go/dlock/otel"
)

// errorTypes returns, for every data point of every instrument, the
// point's dlock.outcome (or dlock.end, for holds) and its error.type ("" when
// it has none), as "instrument outcome error.type" with its count.
func errorTypes(t *testing.T, ms map[string]metricdata.Metrics) map[[3]string]int64 {
	t.Helper()
	out := map[[3]string]int64{}
	add := func(name string, attrs attribute.Set, n int64) {
		outcome, _ := attrs.Value(dlockotel.AttrOutcome)
		if end, ok := attrs.Value(dlockotel.AttrEnd); ok {
			outcome = end
		}
		et, _ := attrs.Value(dlockotel.AttrErrorType)
		out[[3]string{name, outcome.AsString(), et.AsString()}] += n
	}
	for name, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				add(name, p.Attributes, int64(p.Count))
			}
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				add(name, p.Attributes, p.Value)
			}
		}
	}
	return out
}

// Failed acquisitions and losses carry error.type, named after the
// sentinel error; successes carry none.
func TestErrorType(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	store := memory.NewStore()
	l1, _ := memory.New(store, dlock.WithObserver(e.obs), dlock.WithTTL(300*time.Millisecond))
	l2, _ := memory.New(store, dlock.WithObserver(e.obs))
	defer l1.Close()
	a, _ := l1.NewMutex("k")
	b, _ := l2.NewMutex("k")

	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while held: %v", err)
	}
	short, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := b.Lock(short); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock canceled while it waits: %v", err)
	}
	// A renewal, at TTL/3.
	for deadline := time.Now().Add(10 * time.Second); errorTypes(t, e.collect(t))[[3]string{"dlock.lock.renewals", "renewed", ""}] < 1; {
		if time.Now().After(deadline) {
			t.Fatal("no renewal within 10s of a 300ms TTL")
		}
		time.Sleep(20 * time.Millisecond)
	}
	store.Break("k")
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("broken hold not lost")
	}
	_ = l2.Close()
	if err := b.Lock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock on a closed Locker: %v", err)
	}

	got := errorTypes(t, e.collect(t))
	for _, w := range [][3]string{
		{"dlock.lock.wait.duration", "acquired", ""},
		{"dlock.lock.wait.duration", "not_acquired", "not_acquired"},
		{"dlock.lock.wait.duration", "canceled", "canceled"},
		{"dlock.lock.wait.duration", "error", "closed"},
		{"dlock.lock.losses", "", "lock_lost"},
		{"dlock.lock.hold.duration", "lost", ""},
		{"dlock.lock.acquisitions", "", ""},
	} {
		if got[w] != 1 {
			t.Errorf("%s with outcome %q and error.type %q: %d; want 1 (all: %v)", w[0], w[1], w[2], got[w], got)
		}
	}
	for k, n := range got {
		var failed bool
		switch k[0] {
		case "dlock.lock.losses":
			failed = true
		case "dlock.lock.wait.duration":
			failed = k[1] != "acquired"
		case "dlock.lock.renewals":
			failed = k[1] != "renewed"
		case "dlock.lock.renewal.duration":
			continue // no outcome to tell by: TestLossCauses checks it
		}
		if failed != (k[2] != "") {
			t.Errorf("%s with outcome %q: error.type %q (%d points): want one on a failure only", k[0], k[1], k[2], n)
		}
	}
	if got[[3]string{"dlock.lock.renewals", "renewed", ""}] < 1 || got[[3]string{"dlock.lock.renewal.margin", "", ""}] < 1 {
		t.Errorf("no successful renewal without error.type: %v", got)
	}
}
