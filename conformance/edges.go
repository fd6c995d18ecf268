package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// UnlockEndedContext: an Unlock (or a semaphore's Release) whose context
// has ended still gives the key back, at once: a deferred
// Unlock(r.Context()) in an HTTP handler whose client went away must not
// leave the key held on the server for a whole lease, nor the Mutex
// forgetting a hold that nothing can release any more.
func (s *suite) unlockEndedContext(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	ended := map[string]func() context.Context{
		"cancelled": func() context.Context {
			c, cancel := context.WithCancel(context.Background())
			cancel()
			return c
		},
		"past deadline": func() context.Context {
			c, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return c
		},
	}
	for _, name := range []string{"cancelled", "past deadline"} {
		key := s.key(t, name)
		m := mustMutex(t, l1, key, dlock.WithTTL(s.h.longTTL()))
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := m.Unlock(ended[name]()); err != nil {
			t.Fatalf("Unlock with a %s context: %v; want the release done", name, err)
		}
		if !isClosed(m.Done()) || m.Token() != 0 {
			t.Fatalf("Unlock with a %s context returned nil but the Mutex still holds", name)
		}
		other := mustMutex(t, l2, key)
		if err := other.TryLock(ctx); err != nil {
			t.Fatalf("TryLock after an Unlock with a %s context: %v; want the key free", name, err)
		}
		if err := other.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("second Unlock: %v; want ErrNotHeld", err)
		}
	}

	// A multi-key lock's keys, likewise.
	keys := []string{s.key(t, "multi-a"), s.key(t, "multi-b")}
	mm, err := l1.NewMultiMutex(keys, dlock.WithTTL(s.h.longTTL()))
	if err != nil {
		t.Fatalf("NewMultiMutex: %v", err)
	}
	if err := mm.Lock(ctx); err != nil {
		t.Fatalf("MultiMutex.Lock: %v", err)
	}
	if err := mm.Unlock(ended["cancelled"]()); err != nil {
		t.Fatalf("MultiMutex.Unlock with a cancelled context: %v; want the keys given back", err)
	}
	for _, k := range keys {
		other := mustMutex(t, l2, k)
		if err := other.TryLock(ctx); err != nil {
			t.Fatalf("TryLock of %s after a MultiMutex.Unlock with a cancelled context: %v; want the key free", k, err)
		}
		if err := other.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}

	// A semaphore's permit, likewise.
	key := s.key(t, "semaphore")
	sem, err := l1.NewSemaphore(key, 1, dlock.WithTTL(s.h.longTTL()))
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	if err := sem.Lock(ctx); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := sem.Unlock(ended["cancelled"]()); err != nil {
		t.Fatalf("Release with a cancelled context: %v; want the permit given back", err)
	}
	other, err := l2.NewSemaphore(key, 1)
	if err != nil {
		t.Fatalf("NewSemaphore: %v", err)
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryAcquire after a Release with a cancelled context: %v; want the permit free", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// PanicThenClose: a call that panics (a nil context, as the standard
// library panics on one) and is recovered, as net/http recovers a
// handler's panic, never leaves the Locker unable to close, nor a hold it
// had behind on the server.
func (s *suite) panicThenClose(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l := s.locker(t)
	key := s.key(t, "k")
	m := mustMutex(t, l, key, dlock.WithTTL(s.h.longTTL()))
	var nilCtx context.Context
	calls := []struct {
		name string
		call func() error
	}{
		{"TryLock(nil)", func() error { return m.TryLock(nilCtx) }},
		{"Lock(nil)", func() error { return m.Lock(nilCtx) }},
		{"Unlock(nil) holding nothing", func() error { return m.Unlock(nilCtx) }},
		{"Lock", func() error { return m.Lock(ctx) }},
		{"Renew(nil)", func() error { return m.Renew(nilCtx) }},
		{"Unlock(nil) holding", func() error { return m.Unlock(nilCtx) }},
	}
	for _, c := range calls {
		func() {
			defer func() { _ = recover() }()
			err := c.call()
			if c.name == "Lock" && err != nil {
				t.Fatalf("Lock: %v", err)
			}
		}()
	}
	if m.Token() == 0 {
		t.Fatal("the hold taken before the panics is gone")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close after recovered panics: %v", err)
		}
	case <-time.After(slack + 10*time.Second):
		t.Fatal("Close did not return after calls that panicked with a nil context")
	}
	// Close released the hold.
	other := mustMutex(t, s.locker(t), key)
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after Close: %v; want the key released by Close", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
