package dlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/dlock-go/dlock/observe"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// recorder is an Observer that keeps every event as a line of text.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) Begin(ctx context.Context, c observe.Call) context.Context {
	r.add("begin " + c.Op.String() + " " + c.Backend + " " + c.Key)
	return ctx
}
func (r *recorder) Step(_ context.Context, c observe.Call, s observe.Step) {
	r.add("step " + c.Op.String() + " " + s.String())
}
func (r *recorder) End(_ context.Context, c observe.Call, res observe.Result) {
	s := "end " + c.Op.String() + " " + string(res.Outcome)
	if c.Watchdog {
		s += " watchdog"
	}
	r.add(s)
}
func (r *recorder) HoldEnd(e observe.HoldEnd) {
	if e.Lost {
		r.add("hold lost " + observe.LossCause(e.Cause))
		return
	}
	r.add("hold ended " + e.Cause.Error())
}

func (r *recorder) has(t *testing.T, want ...string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	got := strings.Join(r.events, "\n")
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("no event %q in:\n%s", w, got)
		}
	}
}

func TestObserverSeesAHoldsLife(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	store := memory.NewStore()
	// Without mem://'s queue (driver.Acquirer), so that b's Lock waits by
	// watching, and its watch steps are seen.
	l1, _ := dlock.NewLocker(watchOnly{store.Driver()}, dlock.WithObserver(rec), dlock.WithTTL(150*time.Millisecond))
	l2, _ := dlock.NewLocker(watchOnly{store.Driver()}, dlock.WithObserver(rec))
	defer l1.Close()
	defer l2.Close()
	a, _ := l1.NewMutex("k")
	b, _ := l2.NewMutex("k")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Lock(ctx) }()
	time.Sleep(120 * time.Millisecond) // a's watchdog renews meanwhile
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	store.Break("k")
	<-b.Done()
	rec.has(t,
		"begin lock mem k", "end lock acquired", "end trylock not_acquired",
		"step lock watch_set", "step lock woken", "end renew renewed watchdog",
		"begin unlock mem k", "end unlock released", "hold ended "+dlock.ErrUnlocked.Error(),
		"hold lost backend_reported")
}

// watchOnly is a driver whose Locks wait by watching the key: the
// embedded driver's optional interfaces are hidden.
type watchOnly struct{ driver.Locker }

func (watchOnly) Scheme() string { return memory.Scheme }

// slowRenew fails every renewal the way an unreachable server does.
type slowRenew struct{ driver.Locker }

func (slowRenew) Renew(context.Context, driver.Hold) (time.Duration, error) {
	return 0, driver.Unavailable(errors.New("connection refused"))
}

func TestWithLogger(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	l, err := dlock.NewLocker(slowRenew{memory.NewStore().Driver()}, dlock.WithLogger(log), dlock.WithTTL(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("jobs/nightly")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := m.Token()
	<-m.Done()
	mu.Lock()
	defer mu.Unlock()
	levels := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		levels[rec["level"].(string)+" "+rec["msg"].(string)] = rec
	}
	acq := levels["DEBUG dlock: acquired"]
	if acq == nil || acq["key"] != "jobs/nightly" || acq["token"] != float64(tok) {
		t.Errorf("no DEBUG acquisition with key and token: %v", levels)
	}
	if levels["WARN dlock: renewal failed; retrying"] == nil {
		t.Errorf("no WARN for the failed renewal: %v", levels)
	}
	lost := levels["ERROR dlock: lock lost"]
	if lost == nil || lost["cause"] != "renewal_failed" || lost["key"] != "jobs/nightly" || lost["token"] != float64(tok) {
		t.Errorf("no ERROR for the loss with key, token and cause: %v", levels)
	}
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// No observer: the hooks cost a nil check. Compare with the same benchmark
// on a build without hooks, interleaved (see the README's Telemetry
// section for the command and figures).
func BenchmarkLockUnlockMem(b *testing.B) {
	benchLockUnlock(b)
}

type noop struct{}

func (noop) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (noop) Step(context.Context, observe.Call, observe.Step)          {}
func (noop) End(context.Context, observe.Call, observe.Result)         {}
func (noop) HoldEnd(observe.HoldEnd)                                   {}

func BenchmarkLockUnlockMemNoopObserver(b *testing.B) {
	benchLockUnlock(b, dlock.WithObserver(noop{}))
}

// A caller's context that can end (a request's) costs the call a context
// of its own, cancelled by Close; one that never ends costs none.
func BenchmarkLockUnlockMemCancelableCtx(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchLockUnlockCtx(ctx, b)
}

func benchLockUnlock(b *testing.B, opts ...dlock.Option) {
	benchLockUnlockCtx(context.Background(), b, opts...)
}

func benchLockUnlockCtx(ctx context.Context, b *testing.B, opts ...dlock.Option) {
	l, err := memory.New(memory.NewStore(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("bench")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// blockingEnd is an Observer whose HoldEnd waits until release is closed.
type blockingEnd struct {
	noop
	entered chan struct{}
	release chan struct{}
}

func (b blockingEnd) HoldEnd(observe.HoldEnd) {
	close(b.entered)
	<-b.release
}

// A Renew that finds the hold lost while the driver's own loss signal is
// ending it (and telling the observers) returns only once Done is closed:
// a caller told ErrLockLost never finds Done still open.
func TestRenewReportingLossWaitsForDone(t *testing.T) {
	ctx := context.Background()
	s := memory.NewStore()
	obs := blockingEnd{entered: make(chan struct{}), release: make(chan struct{})}
	l, err := memory.New(s, dlock.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	release := sync.OnceFunc(func() { close(obs.release) })
	defer release() // before Close, which waits for the hold's end
	m, _ := l.NewMutex("k", dlock.WithAutoRenew(false))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	s.Break("k") // the loss signal: its callback blocks in HoldEnd
	<-obs.entered
	renewed := make(chan error, 1)
	go func() { renewed <- m.Renew(ctx) }()
	select {
	case err := <-renewed:
		t.Fatalf("Renew returned %v while the hold's end was still being reported (Done open: %v)", err, !isDone(m.Done()))
	case <-time.After(200 * time.Millisecond):
	}
	release()
	if err := <-renewed; !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Renew after Break: %v; want ErrLockLost", err)
	}
	if !isDone(m.Done()) {
		t.Fatal("Done open after Renew reported the loss")
	}
}

// blockedRenew holds every renewal until its context ends.
type blockedRenew struct {
	driver.Locker
	entered chan struct{}
}

func (b blockedRenew) Renew(ctx context.Context, _ driver.Hold) (time.Duration, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return 0, driver.Unavailable(ctx.Err())
}

// A watchdog renewal that Unlock cuts short is reported canceled: it did
// not fail, and nothing warns of it.
func TestUnlockCancelsRenewalNotFailed(t *testing.T) {
	ctx := context.Background()
	rec := &recorder{}
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, nil))
	drv := blockedRenew{memory.NewStore().Driver(), make(chan struct{}, 1)}
	l, err := dlock.NewLocker(drv, dlock.WithObserver(rec), dlock.WithLogger(log), dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("k")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	<-drv.entered
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	rec.has(t, "end renew canceled watchdog", "end unlock released")
	rec.mu.Lock()
	for _, e := range rec.events {
		if strings.HasPrefix(e, "end renew failed") {
			t.Errorf("%q: a renewal cut short by Unlock reported as failed", e)
		}
	}
	rec.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if strings.Contains(buf.String(), "renewal failed") {
		t.Errorf("a renewal cut short by Unlock logged as failed: %s", buf.String())
	}
}
