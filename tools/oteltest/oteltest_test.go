package oteltest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/consul"
	_ "github.com/dlock-go/dlock/backend/etcd"
	_ "github.com/dlock-go/dlock/backend/redis"
	_ "github.com/dlock-go/dlock/backend/redlock"
	_ "github.com/dlock-go/dlock/backend/zookeeper"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/internal/topology"
	dlockotel "github.com/dlock-go/dlock/otel"
)

type env struct {
	obs    *dlockotel.Observer
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(e.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(e.spans))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	obs, err := dlockotel.New(dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	e.obs = obs
	return e
}

// count is the sum (counters) or the count (histograms) of name's points
// whose attributes include every one of kv.
func (e *env) count(t *testing.T, name string, kv ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := e.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	match := func(s attribute.Set) bool {
		for _, want := range kv {
			if v, ok := s.Value(want.Key); !ok || v != want.Value {
				return false
			}
		}
		return true
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				if m.Unit != "s" {
					t.Errorf("%s: unit %q, want s", name, m.Unit)
				}
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						n += int64(p.Count)
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if match(p.Attributes) {
						n += p.Value
					}
				}
			}
		}
	}
	return n
}

// eventually waits until cond holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func prefixed(raw, sep string) string {
	return raw + sep + fmt.Sprintf("prefix=dlockotel%d", rand.IntN(1_000_000))
}

// Every instrument and span, with its attributes, on one real server of
// each kind.
func TestInstrumentsOnEveryBackend(t *testing.T) {
	cases := []struct {
		name, env, backend, query string
		ttl                       time.Duration
	}{
		{"redis", "DLOCK_REDIS_URL", "redis", "?", time.Second},
		{"redlock", "DLOCK_REDLOCK_URL", "redlock", "?", time.Second},
		{"etcd", "DLOCK_ETCD_URL", "etcd", "", 2 * time.Second},
		{"zookeeper", "DLOCK_ZK_URL", "zk", "", 10 * time.Second},
		{"consul", "DLOCK_CONSUL_URL", "consul", "", 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := testenv.Endpoint(t, tc.env)
			url := raw + "/dlockotel" + fmt.Sprint(rand.IntN(1_000_000))
			if tc.query != "" {
				url = prefixed(raw, tc.query)
			}
			url += map[bool]string{true: "&", false: "?"}[tc.query != ""] + "ttl=" + tc.ttl.String()
			e := newEnv(t)
			ctx := testenv.Context(t, 2*time.Minute)
			la, err := dlock.Open(ctx, url, dlock.WithObserver(e.obs))
			if err != nil {
				t.Fatal(err)
			}
			defer la.Close()
			lb, err := dlock.Open(ctx, url, dlock.WithObserver(e.obs))
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			a, _ := la.NewMutex("k")
			b, _ := lb.NewMutex("k")
			if err := a.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryLock while held: %v", err)
			}
			short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			if err := b.Lock(short); err == nil {
				t.Fatal("Lock while held succeeded")
			}
			cancel()
			be := dlockotel.AttrBackend.String(tc.backend)
			out := func(s string) attribute.KeyValue { return dlockotel.AttrOutcome.String(s) }
			eventually(t, 2*tc.ttl, "a watchdog renewal", func() bool {
				return e.count(t, "dlock.lock.renewals", be, out("renewed")) > 0
			})
			if err := a.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			checks := []struct {
				name string
				kv   []attribute.KeyValue
				min  int64
			}{
				{"dlock.lock.wait.duration", []attribute.KeyValue{be, out("acquired")}, 1},
				{"dlock.lock.wait.duration", []attribute.KeyValue{be, dlockotel.AttrOp.String("trylock"), out("not_acquired")}, 1},
				{"dlock.lock.wait.duration", []attribute.KeyValue{be, dlockotel.AttrOp.String("lock"), out("canceled")}, 1},
				{"dlock.lock.acquisitions", []attribute.KeyValue{be}, 1},
				{"dlock.lock.hold.duration", []attribute.KeyValue{be, dlockotel.AttrEnd.String("unlocked")}, 1},
				{"dlock.lock.renewal.duration", []attribute.KeyValue{be}, 1},
				{"dlock.lock.renewal.margin", []attribute.KeyValue{be}, 1},
			}
			for _, c := range checks {
				if got := e.count(t, c.name, c.kv...); got < c.min {
					t.Errorf("%s%v = %d, want >= %d", c.name, c.kv, got, c.min)
				}
			}
			if got := e.count(t, "dlock.lock.held", be); got != 0 {
				t.Errorf("dlock.lock.held = %d after Unlock, want 0", got)
			}
			spans := map[string]int{}
			for _, s := range e.spans.Ended() {
				for _, kv := range s.Attributes() {
					if kv == be {
						spans[s.Name()]++
					}
				}
			}
			for _, n := range []string{"dlock.Lock", "dlock.TryLock", "dlock.Unlock", "dlock.Renew"} {
				if spans[n] == 0 {
					t.Errorf("no %s span with %v: %v", n, be, spans)
				}
			}
		})
	}
}

// privateRedis starts a Redis of the test's own, so that it can be stopped
// and flushed without disturbing other tests.
func privateRedis(t *testing.T) (*launcher.Launcher, topology.Topology) {
	t.Helper()
	testenv.Endpoint(t, "DLOCK_REDIS_URL") // the servers are installed
	if _, err := exec.LookPath(topology.RedisServer); err != nil {
		t.Fatal(err)
	}
	base, _ := topology.Lookup(topology.All(), "redis")
	tp, err := launcher.Private(base, fmt.Sprintf("otelredis%d", rand.IntN(1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := launcher.New(t.TempDir(), []topology.Topology{tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Down(context.Background()) })
	if err := l.Up(testenv.Context(t, time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	return l, tp
}

func TestLossCausesOnRedis(t *testing.T) {
	ctx := testenv.Context(t, 2*time.Minute)
	l, tp := privateRedis(t)
	e := newEnv(t)
	locker, err := dlock.Open(ctx, tp.URL()+"?ttl=1s", dlock.WithObserver(e.obs))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	be := dlockotel.AttrBackend.String("redis")
	cause := func(s string) attribute.KeyValue { return dlockotel.AttrLossCause.String(s) }

	// Broken from outside: the key is gone, the next renewal says so.
	m, _ := locker.NewMutex("broken")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	opt, _ := redis.ParseURL(tp.URL())
	admin := redis.NewClient(opt)
	defer admin.Close()
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	<-m.Done()
	if got := e.count(t, "dlock.lock.losses", be, cause("backend_reported")); got != 1 {
		t.Errorf("losses{backend_reported} = %d after the key was flushed, want 1", got)
	}

	// The server stopped: renewals fail until the validity window runs out.
	m2, _ := locker.NewMutex("stopped")
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(ctx, tp.Nodes[0].Name); err != nil {
		t.Fatal(err)
	}
	<-m2.Done()
	if got := e.count(t, "dlock.lock.losses", be, cause("renewal_failed")); got != 1 {
		t.Errorf("losses{renewal_failed} = %d after the server stopped, want 1", got)
	}
	// The renewal in flight when the window ran out ends just after Done.
	eventually(t, 10*time.Second, "a failed renewal recorded", func() bool {
		return e.count(t, "dlock.lock.renewals", be, dlockotel.AttrOutcome.String("failed")) >= 1
	})
	if got := e.count(t, "dlock.lock.hold.duration", be, dlockotel.AttrEnd.String("lost")); got != 2 {
		t.Errorf("hold.duration{lost} = %d, want 2", got)
	}
}
