package dlock_test

import (
	"context"
	"errors"
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
