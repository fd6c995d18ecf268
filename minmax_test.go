package dlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/observe"
)

// noLapse is a driver without driver.Lapser.
type noLapse struct{ driver.Locker }

// A minimum hold needs a driver that can let a hold lapse: without one it
// is refused at NewLocker and NewMutex, as are negative durations and a
// maximum below the minimum; a maximum alone needs nothing of the driver.
func TestMinHoldValidation(t *testing.T) {
	store := memory.NewStore()
	if l, err := dlock.NewLocker(noLapse{store.Driver()}, dlock.WithMinHold(time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		if err == nil {
			_ = l.Close()
		}
		t.Errorf("NewLocker with a minimum hold on a driver without Lapser: %v; want ErrInvalidOption", err)
	}
	l, err := dlock.NewLocker(noLapse{store.Driver()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.NewMutex("k", dlock.WithMinHold(time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("NewMutex with a minimum hold on a driver without Lapser: %v; want ErrInvalidOption", err)
	}
	if _, err := l.NewSemaphore("s", 2, dlock.WithMinHold(time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("NewSemaphore with a minimum hold on a driver without Lapser: %v; want ErrInvalidOption", err)
	}
	if _, err := l.NewMutex("k", dlock.WithMaxHold(time.Second)); err != nil {
		t.Errorf("NewMutex with a maximum hold on a driver without Lapser: %v", err)
	}
	ml, err := memory.New(store)
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close()
	for what, opts := range map[string][]dlock.Option{
		"negative minimum":      {dlock.WithMinHold(-1)},
		"negative maximum":      {dlock.WithMaxHold(-1)},
		"maximum below minimum": {dlock.WithMinHold(time.Minute), dlock.WithMaxHold(time.Second)},
	} {
		if _, err := ml.NewMutex("k", opts...); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("NewMutex with a %s: %v; want ErrInvalidOption", what, err)
		}
	}
}

// requests records the acquire requests a driver is sent, and keeps the
// driver's Lapser.
type requests struct {
	driver.Locker
	max  time.Duration // Limits.MaxTTL
	mu   sync.Mutex
	reqs []driver.Request
}

func (r *requests) Limits() driver.Limits { return driver.Limits{MaxTTL: r.max} }

func (r *requests) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.Locker.TryAcquire(ctx, req)
}

func (r *requests) ReleaseAfter(ctx context.Context, h driver.Hold, d time.Duration) error {
	return r.Locker.(driver.Lapser).ReleaseAfter(ctx, h, d)
}

// The lease asked for is raised to the minimum hold, within the backend's
// largest, and the request carries the minimum.
func TestMinHoldRaisesTTL(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		ttl, minHold, limit, want time.Duration
	}{
		{time.Second, time.Minute, time.Hour, time.Minute},
		{time.Minute, time.Second, time.Hour, time.Minute},
		{time.Second, 2 * time.Hour, time.Hour, time.Hour},
	} {
		r := &requests{Locker: memory.NewStore().Driver(), max: c.limit}
		l, err := dlock.NewLocker(r, dlock.WithTTL(c.ttl), dlock.WithMinHold(c.minHold))
		if err != nil {
			t.Fatal(err)
		}
		m, _ := l.NewMutex("k")
		if err := m.TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		if got := r.reqs[0]; got.TTL != c.want || got.MinHold != c.minHold {
			t.Errorf("TTL %v, minimum hold %v, largest lease %v: request TTL %v MinHold %v; want %v and %v",
				c.ttl, c.minHold, c.limit, got.TTL, got.MinHold, c.want, c.minHold)
		}
		if got := m.Lease().TTL; got != c.want {
			t.Errorf("Lease().TTL %v; want %v", got, c.want)
		}
		_ = l.Close()
	}
}

// logLines returns the JSON log's records by "LEVEL msg".
func logLines(t *testing.T, mu *sync.Mutex, buf *bytes.Buffer) map[string]map[string]any {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	out := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[rec["level"].(string)+" "+rec["msg"].(string)] = rec
	}
	return out
}

// A lapse is no loss: the logger writes no "lock lost" for an Unlock
// before the minimum hold. A maximum hold is logged at WARN with its own
// message, not as a failure; LossCause names it "max_hold".
func TestMinMaxHoldLogged(t *testing.T) {
	var (
		buf bytes.Buffer
		mu  sync.Mutex
	)
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx := context.Background()
	l, err := memory.New(memory.NewStore(), dlock.WithLogger(log), dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("jobs/nightly", dlock.WithMinHold(time.Minute))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if recs := logLines(t, &mu, &buf); recs["ERROR dlock: lock lost"] != nil || recs["DEBUG dlock: released"] == nil {
		t.Errorf("an Unlock before the minimum hold was logged %v; want a DEBUG release and no loss", recs)
	}

	m2, _ := l.NewMutex("jobs/bounded", dlock.WithMaxHold(300*time.Millisecond))
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m2.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done still open 10s after a maximum hold of 300ms")
	}
	if err := m2.Err(); !errors.Is(err, dlock.ErrMaxHoldReached) || !errors.Is(err, dlock.ErrLockLost) || observe.LossCause(err) != "max_hold" {
		t.Errorf("Err at the maximum hold: %v (LossCause %q); want ErrLockLost, ErrMaxHoldReached, max_hold", err, observe.LossCause(err))
	}
	recs := logLines(t, &mu, &buf)
	if w := recs["WARN dlock: maximum hold reached; released"]; w == nil || w["key"] != "jobs/bounded" {
		t.Errorf("no WARN for the maximum hold: %v", recs)
	}
	if recs["ERROR dlock: lock lost"] != nil {
		t.Errorf("a maximum hold logged as a lost lock: %v", recs)
	}
}
