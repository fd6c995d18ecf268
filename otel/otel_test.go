package dlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
	dlockotel "github.com/dlock-go/dlock/otel"
)

// env is an Observer over a ManualReader and a span recorder.
type env struct {
	obs    *dlockotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newEnv(t *testing.T, opts ...dlockotel.Option) *env {
	t.Helper()
	e := &env{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	obs, err := dlockotel.New(append([]dlockotel.Option{dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	e.obs = obs
	return e
}

func (e *env) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// points returns the data points' attribute sets with their counts (for a
// histogram) or sums (for a counter).
func points(t *testing.T, m metricdata.Metrics) map[attribute.Distinct]int64 {
	t.Helper()
	out := map[attribute.Distinct]int64{}
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out[p.Attributes.Equivalent()] += int64(p.Count)
		}
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out[p.Attributes.Equivalent()] += p.Value
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	return out
}

func set(kv ...attribute.KeyValue) attribute.Distinct {
	s := attribute.NewSet(kv...)
	return s.Equivalent()
}

// want checks that metric name has exactly the value v at the attribute set.
func want(t *testing.T, ms map[string]metricdata.Metrics, name, unit string, v int64, kv ...attribute.KeyValue) {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Errorf("no instrument %s", name)
		return
	}
	if m.Unit != unit {
		t.Errorf("%s: unit %q, want %q", name, m.Unit, unit)
	}
	if got := points(t, m)[set(kv...)]; got != v {
		t.Errorf("%s%v = %d, want %d (all points: %v)", name, kv, got, v, points(t, m))
	}
}

var mem = dlockotel.AttrBackend.String("mem")

func errType(v string) attribute.KeyValue { return dlockotel.AttrErrorType.String(v) }

func TestInstrumentsAndSpans(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	l, err := dlock.Open(ctx, "mem://otel-basic?ttl=300ms", dlock.WithObserver(e.obs))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, _ := l.NewMutex("k")
	l2, err := dlock.Open(ctx, "mem://otel-basic", dlock.WithObserver(e.obs))
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	b, _ := l2.NewMutex("k")

	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while held: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := b.Lock(short); err == nil {
		t.Fatal("Lock while held succeeded")
	}
	cancel()
	time.Sleep(250 * time.Millisecond) // the watchdog renews at TTL/3
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	ms := e.collect(t)
	want(t, ms, "dlock.lock.wait.duration", "s", 1, mem, dlockotel.AttrOp.String("lock"), dlockotel.AttrOutcome.String("acquired"))
	want(t, ms, "dlock.lock.wait.duration", "s", 1, mem, dlockotel.AttrOp.String("trylock"), dlockotel.AttrOutcome.String("not_acquired"), errType("not_acquired"))
	want(t, ms, "dlock.lock.wait.duration", "s", 1, mem, dlockotel.AttrOp.String("lock"), dlockotel.AttrOutcome.String("canceled"), errType("deadline_exceeded"))
	want(t, ms, "dlock.lock.acquisitions", "{acquisition}", 1, mem)
	want(t, ms, "dlock.lock.held", "{lock}", 0, mem)
	want(t, ms, "dlock.lock.hold.duration", "s", 1, mem, dlockotel.AttrEnd.String("unlocked"))
	renewals := points(t, ms["dlock.lock.renewals"])
	renewed := renewals[set(mem, dlockotel.AttrOutcome.String("renewed"), dlockotel.AttrWatchdog.Bool(true))]
	canceled := renewals[set(mem, dlockotel.AttrOutcome.String("canceled"), dlockotel.AttrWatchdog.Bool(true), errType("canceled"))]
	if renewed < 1 {
		t.Errorf("no watchdog renewal recorded: %v", renewals)
	}
	// A renewal that the Unlock cut short is canceled, never failed.
	var all int64
	for _, n := range renewals {
		all += n
	}
	if all != renewed+canceled {
		t.Errorf("renewals other than renewed or canceled: %v", renewals)
	}
	want(t, ms, "dlock.lock.renewal.duration", "s", renewed, mem)
	if canceled > 0 {
		want(t, ms, "dlock.lock.renewal.duration", "s", canceled, mem, errType("canceled"))
	}
	want(t, ms, "dlock.lock.renewal.margin", "s", renewed, mem)
	if _, ok := ms["dlock.lock.losses"]; ok {
		t.Errorf("a loss recorded without one: %v", points(t, ms["dlock.lock.losses"]))
	}

	names := map[string]int{}
	var lockSpan, renewSpan sdktrace.ReadOnlySpan
	for _, s := range e.spans.Ended() {
		names[s.Name()]++
		switch s.Name() {
		case "dlock.Lock":
			if attrOf(s, dlockotel.AttrOutcome) == "acquired" {
				lockSpan = s
			}
		case "dlock.Renew":
			renewSpan = s
		}
	}
	if names["dlock.Lock"] != 2 || names["dlock.TryLock"] != 1 || names["dlock.Unlock"] != 1 || names["dlock.Renew"] < 1 {
		t.Errorf("spans: %v", names)
	}
	if lockSpan == nil || attrOf(lockSpan, dlockotel.AttrBackend) != "mem" || attrOf(lockSpan, dlockotel.AttrToken) == "" {
		t.Errorf("Lock span lacks backend or token: %v", lockSpan)
	}
	if renewSpan != nil && (renewSpan.Parent().IsValid() || attrOf(renewSpan, dlockotel.AttrWatchdog) != "true") {
		t.Errorf("watchdog renewal span is not a root marked watchdog: parent %v", renewSpan.Parent())
	}
}

// The canceled Lock waited behind a holder: its span shows the wait.
func TestWaitStepsAreSpanEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	store := memory.NewStore()
	// Without mem://'s queue (driver.Acquirer), so that b's Lock waits by
	// watching, and every wait step is a span event.
	l1, _ := dlock.NewLocker(watchOnly{store.Driver()}, dlock.WithObserver(e.obs))
	l2, _ := dlock.NewLocker(watchOnly{store.Driver()}, dlock.WithObserver(e.obs))
	defer l1.Close()
	defer l2.Close()
	a, _ := l1.NewMutex("k")
	b, _ := l2.NewMutex("k")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	_ = b.Unlock(ctx)
	var events []string
	for _, s := range e.spans.Ended() {
		if s.Name() == "dlock.Lock" && len(s.Events()) > 0 {
			for _, ev := range s.Events() {
				events = append(events, ev.Name)
			}
		}
	}
	if len(events) < 2 || events[0] != "watch_set" || events[len(events)-1] != "woken" {
		t.Errorf("wait events %v, want watch_set ... woken", events)
	}
}

// watchOnly is a driver seen only through driver.Locker: its waiting
// Locks watch and retry, whatever queue the driver has.
type watchOnly struct{ driver.Locker }

// failRenew is the memory driver with renewals that fail as an unreachable
// server's would.
type failRenew struct {
	driver.Locker
}

func (failRenew) Scheme() string { return memory.Scheme }

func (failRenew) Renew(context.Context, driver.Hold) (time.Duration, error) {
	return 0, driver.Unavailable(errors.New("connection refused"))
}

func TestLossCauses(t *testing.T) {
	e := newEnv(t, dlockotel.WithKeyAttribute())
	ctx := context.Background()
	store := memory.NewStore()

	// Renewals fail until the validity window runs down.
	l, err := dlock.NewLocker(failRenew{store.Driver()}, dlock.WithObserver(e.obs), dlock.WithTTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("failing")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("hold with failing renewals not lost")
	}

	// Broken from outside: the backend reports it.
	l2, _ := memory.New(store, dlock.WithObserver(e.obs))
	defer l2.Close()
	m2, _ := l2.NewMutex("broken")
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	store.Break("broken")
	select {
	case <-m2.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("broken hold not lost")
	}

	ms := e.collect(t)
	key := func(k string) attribute.KeyValue { return dlockotel.AttrKey.String(k) }
	memDrv := mem
	want(t, ms, "dlock.lock.losses", "{loss}", 1, memDrv, key("failing"), dlockotel.AttrLossCause.String("renewal_failed"), errType("lock_lost"))
	want(t, ms, "dlock.lock.losses", "{loss}", 1, memDrv, key("broken"), dlockotel.AttrLossCause.String("backend_reported"), errType("lock_lost"))
	want(t, ms, "dlock.lock.hold.duration", "s", 1, memDrv, key("failing"), dlockotel.AttrEnd.String("lost"))
	failing := []attribute.KeyValue{memDrv, key("failing"), errType("unavailable")}
	failed := points(t, ms["dlock.lock.renewals"])[set(append(failing, dlockotel.AttrOutcome.String("failed"), dlockotel.AttrWatchdog.Bool(true))...)]
	if failed < 1 {
		t.Errorf("no failed renewal recorded with error.type unavailable: %v", points(t, ms["dlock.lock.renewals"]))
	}
	if d := points(t, ms["dlock.lock.renewal.duration"])[set(failing...)]; d < failed {
		t.Errorf("%d failed renewals, %d durations with error.type unavailable: %v", failed, d, points(t, ms["dlock.lock.renewal.duration"]))
	}
	var errSpans int
	for _, s := range e.spans.Ended() {
		if s.Name() == "dlock.Renew" && s.Status().Code == codes.Error && len(s.Events()) > 0 && attrOf(s, dlockotel.AttrErrorType) != "" {
			errSpans++
		}
	}
	if errSpans < 1 {
		t.Error("no failed renewal span with its error recorded")
	}
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.Emit()
		}
	}
	return ""
}

// A hold ended at its maximum (dlock.WithMaxHold) is counted apart from
// failures: dlock.loss.cause max_hold, error.type max_hold_reached, and
// dlock.end max_hold. A minimum hold's lapse is no loss.
func TestMaxHoldCounted(t *testing.T) {
	e := newEnv(t, dlockotel.WithKeyAttribute())
	ctx := context.Background()
	l, err := memory.New(memory.NewStore(), dlock.WithObserver(e.obs), dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("bounded", dlock.WithMaxHold(200*time.Millisecond))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("hold not ended at its maximum")
	}
	m2, _ := l.NewMutex("lapsed", dlock.WithMinHold(time.Minute))
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ms := e.collect(t)
	key := func(k string) attribute.KeyValue { return dlockotel.AttrKey.String(k) }
	want(t, ms, "dlock.lock.losses", "{loss}", 1, mem, key("bounded"), dlockotel.AttrLossCause.String("max_hold"), errType("max_hold_reached"))
	want(t, ms, "dlock.lock.hold.duration", "s", 1, mem, key("bounded"), dlockotel.AttrEnd.String("max_hold"))
	want(t, ms, "dlock.lock.hold.duration", "s", 1, mem, key("lapsed"), dlockotel.AttrEnd.String("unlocked"))
	if n := points(t, ms["dlock.lock.losses"])[set(mem, key("lapsed"), dlockotel.AttrLossCause.String(""), errType("_OTHER"))]; n != 0 {
		t.Errorf("the minimum hold's lapse counted as a loss")
	}
	if got := len(points(t, ms["dlock.lock.losses"])); got != 1 {
		t.Errorf("%d loss series; want the maximum hold's alone: %v", got, points(t, ms["dlock.lock.losses"]))
	}
}
