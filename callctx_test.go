package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// deriving is a memory driver whose TryAcquire derives a context of its
// own from the call's, as network drivers do (a deadline per request), and
// waits on it, reporting what ended it.
type deriving struct {
	driver.Locker
	entered chan struct{}
	seen    chan derived
}

type derived struct {
	cause error
	value any
}

type ctxKey struct{}

func (d *deriving) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d.entered <- struct{}{}
	<-dctx.Done()
	d.seen <- derived{cause: context.Cause(dctx), value: dctx.Value(ctxKey{})}
	return driver.Hold{}, dctx.Err()
}

// A context a driver derives from a call's is ended by Close, with the
// cause ErrClosed, and carries the caller's values, whatever the caller's
// context: context.Background(), another that never ends, or one that can.
func TestCloseEndsContextsDerivedFromACall(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		value any
	}{
		{"background", context.Background(), nil},
		{"never-ends", context.WithValue(context.Background(), ctxKey{}, "v"), "v"},
		{"can-end", cancelled, "v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &deriving{Locker: memory.NewStore().Driver(), entered: make(chan struct{}, 1), seen: make(chan derived, 1)}
			l, err := dlock.NewLocker(d)
			if err != nil {
				t.Fatal(err)
			}
			m, err := l.NewMutex("k")
			if err != nil {
				t.Fatal(err)
			}
			res := make(chan error, 1)
			go func() { res <- m.TryLock(tc.ctx) }()
			<-d.entered
			_ = l.Close()
			select {
			case got := <-d.seen:
				if !errors.Is(got.cause, dlock.ErrClosed) {
					t.Errorf("cause of the derived context: %v, want ErrClosed", got.cause)
				}
				if got.value != tc.value {
					t.Errorf("value in the derived context: %v, want %v", got.value, tc.value)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the derived context did not end at Close")
			}
			if err := <-res; !errors.Is(err, dlock.ErrClosed) {
				t.Errorf("TryLock: %v, want ErrClosed", err)
			}
		})
	}
}

// releasing is a memory driver whose Release derives a context of its own
// from the call's and reports it, then waits for the test before it
// releases.
type releasing struct {
	driver.Locker
	seen chan context.Context
	goOn chan struct{}
}

func (d *releasing) Release(ctx context.Context, h driver.Hold) error {
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d.seen <- dctx
	<-d.goOn
	return d.Locker.Release(dctx, h)
}

// An Unlock's context carries the caller's values, not its end: a release
// whose caller's context ends while it runs goes on (for releaseGrace).
func TestUnlockContextOutlivesItsCaller(t *testing.T) {
	d := &releasing{Locker: memory.NewStore().Driver(), seen: make(chan context.Context, 1), goOn: make(chan struct{})}
	l, err := dlock.NewLocker(d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var goOn sync.Once
	defer goOn.Do(func() { close(d.goOn) }) // before Close, which waits for the Unlock
	m, err := l.NewMutex("k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() { res <- m.Unlock(ctx) }()
	dctx := <-d.seen
	if v := dctx.Value(ctxKey{}); v != "v" {
		t.Errorf("value in the release's context: %v, want v", v)
	}
	cancel()
	select {
	case <-dctx.Done():
		t.Fatalf("the release's context ended with its caller's: %v", context.Cause(dctx))
	case <-time.After(300 * time.Millisecond):
	}
	goOn.Do(func() { close(d.goOn) })
	if err := <-res; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := m.TryLock(context.Background()); err != nil {
		t.Fatalf("TryLock after the Unlock: %v, want the key free", err)
	}
}
