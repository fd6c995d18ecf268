package dlock_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
	"github.com/dlock-go/dlock/backend/memory"
)

// rwBackends returns a function making independent Lockers (as separate
// processes would be) on one store, per in-process backend.
func rwBackends(t *testing.T) map[string]func() *dlock.Locker {
	st := memory.NewStore()
	dir := t.TempDir()
	mk := func(l *dlock.Locker, err error) *dlock.Locker {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	return map[string]func() *dlock.Locker{
		"memory": func() *dlock.Locker { return mk(memory.New(st)) },
		"file":   func() *dlock.Locker { return mk(file.New(dir)) },
	}
}

// A reader that loses the gate while it waits for a reader slot (so that
// a writer may pass the gate and see the slot free) gives the slot back
// instead of reporting a read hold, and comes in after the writer.
func TestRWMutexGateLostWhilePassing(t *testing.T) {
	for name, newLocker := range rwBackends(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ttl := dlock.WithTTL(30 * time.Second)
			mk := func() *dlock.RWMutex {
				rw, err := newLocker().NewRWMutex("doc", 1, ttl)
				if err != nil {
					t.Fatal(err)
				}
				return rw
			}
			r1, r2, w := mk(), mk(), mk()
			op := newLocker()
			if err := r1.RLock(ctx); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() { got <- r2.RLock(ctx) }()
			// r2 holds the gate, waiting for r1's slot.
			waitHeld(t, ctx, op, r1.GateKey())
			if _, err := op.Break(ctx, r1.GateKey()); err != nil {
				t.Fatal(err)
			}
			wgot := make(chan error, 1)
			go func() { wgot <- w.Lock(ctx) }()
			time.Sleep(100 * time.Millisecond) // w holds the gate, waits for r1
			if err := r1.RUnlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-wgot:
				if err != nil {
					t.Fatalf("writer: %v", err)
				}
			case err := <-got:
				t.Fatalf("the reader whose gate was broken got in (%v) before the writer, which had passed the gate", err)
			}
			if r2.Token() != 0 {
				t.Fatal("the reader holds while the writer does")
			}
			select {
			case err := <-got:
				t.Fatalf("the reader got in while the writer holds (%v)", err)
			case <-time.After(200 * time.Millisecond):
			}
			if err := w.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("the reader after the writer: %v", err)
			}
			_ = r2.RUnlock(ctx)
		})
	}
}

func waitHeld(t *testing.T, ctx context.Context, l *dlock.Locker, key string) {
	t.Helper()
	for {
		info, err := l.Inspect(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if info.Held {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An RWMutex leaves no goroutine behind: after a read and a write, after
// a writer's wait for readers cut short by its context, and after Close.
func TestRWMutexNoGoroutineLeak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := memory.NewStore()
	l, err := memory.New(st)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := memory.New(st)
	defer other.Close()
	base := runtime.NumGoroutine()
	rw, err := l.NewRWMutex("doc", 2, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := rw.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rw.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := rw.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settleGoroutines(t, base, "after reads and writes")
	reader, _ := other.NewRWMutex("doc", 2, dlock.WithTTL(time.Second))
	if err := reader.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = rw.Lock(sctx)
	scancel()
	if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while a reader holds, ctx ending: %v; want ErrNotAcquired and DeadlineExceeded", err)
	}
	if err := rw.TryRLock(ctx); err != nil {
		t.Fatalf("TryRLock after the writer gave up: %v", err)
	}
	_ = rw.RUnlock(ctx)
	_ = reader.RUnlock(ctx)
	settleGoroutines(t, base, "after a writer's wait cut short")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}
