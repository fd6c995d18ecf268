package dlock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// settleGoroutines waits until no more than base goroutines run, and fails
// with their stacks otherwise.
func settleGoroutines(t *testing.T, base int, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%s: %d goroutines, want at most %d:\n%s", when, runtime.NumGoroutine(), base, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A MultiMutex leaves no goroutine behind: after Unlock, after a Lock
// whose context ended, after a key was lost, and after Close.
func TestMultiMutexNoGoroutineLeak(t *testing.T) {
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
	mm, err := l.NewMultiMutex([]string{"a", "b", "c"}, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := mm.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := mm.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	settleGoroutines(t, base, "after Lock and Unlock")

	blocker, _ := other.NewMutex("c")
	if err := blocker.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := mm.Lock(sctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock with c held elsewhere: %v", err)
	}
	scancel()
	_ = blocker.Unlock(ctx)
	settleGoroutines(t, base, "after a Lock that timed out")

	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.Break("b") {
		t.Fatal("b not held")
	}
	select {
	case <-mm.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done open after a key was broken")
	}
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after a loss: %v", err)
	}
	settleGoroutines(t, base, "after a loss")

	if err := mm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	if !errors.Is(mm.Err(), dlock.ErrClosed) {
		t.Fatalf("Err after Close: %v", mm.Err())
	}
	settleGoroutines(t, base, "after Close")
}

// A Semaphore leaves no goroutine behind: after a wait that was served,
// a wait whose context ended, and a wait cut short by Close.
func TestSemaphoreNoGoroutineLeak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()
	a, _ := l.NewSemaphore("s", 2)
	b, _ := l.NewSemaphore("s", 2)
	c, _ := l.NewSemaphore("s", 2)
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := c.Lock(sctx); !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with every permit held: %v", err)
	}
	scancel()
	res := make(chan error, 1)
	go func() { res <- c.Lock(ctx) }()
	time.Sleep(20 * time.Millisecond)
	_ = a.Unlock(ctx)
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	_ = b.Unlock(ctx)
	_ = c.Unlock(ctx)
	settleGoroutines(t, base, "after waits served and timed out")

	_ = a.Lock(ctx)
	_ = b.Lock(ctx)
	go func() { res <- c.Lock(ctx) }()
	time.Sleep(20 * time.Millisecond)
	_ = l.Close()
	if err := <-res; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Acquire cut short by Close: %v", err)
	}
	settleGoroutines(t, base, "after Close")
}

// The permit count is recorded in front of the owner description, which
// is shortened to fit.
func TestSemaphoreOwnerTag(t *testing.T) {
	ctx := context.Background()
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	long := strings.Repeat("ü", driver.MaxMetaLen/2)
	s, err := l.NewSemaphore("s", 3, dlock.WithOwner(long))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := l.Inspect(ctx, s.PermitKey())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.Owner, "permits=3 ü") || len(info.Owner) > driver.MaxMetaLen {
		t.Fatalf("owner %q (%d bytes); want permits=3 and the description, within %d bytes", info.Owner[:20], len(info.Owner), driver.MaxMetaLen)
	}
	// A plain lock on a permit key is a disagreement too.
	plain, _ := l.NewMutex("t#permit/1")
	if err := plain.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 10 { // whichever slot Acquire starts from
		t2, _ := l.NewSemaphore("t", 2)
		err := t2.TryLock(ctx)
		if !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("TryAcquire beside a plain lock on a permit key: %v; want ErrInvalidOption", err)
		}
	}
}

// A nil Locker is a typed error, not a panic.
func TestNilLockerIsInvalidOption(t *testing.T) {
	var l *dlock.Locker
	if _, err := l.NewMutex("k"); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("nil Locker's NewMutex = %v, want ErrInvalidOption", err)
	}
	if _, err := l.NewMultiMutex([]string{"k"}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("nil Locker's NewMultiMutex = %v, want ErrInvalidOption", err)
	}
	if _, err := l.NewSemaphore("k", 2); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("nil Locker's NewSemaphore = %v, want ErrInvalidOption", err)
	}
	if _, err := l.NewElection("k"); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("nil Locker's NewElection = %v, want ErrInvalidOption", err)
	}
}

// noRecords is a driver that can inspect keys but keeps no records (a
// third-party driver).
type noRecords struct {
	driver.Locker
	driver.Inspector
}

// ResetSemaphore: bad input is a typed error; a closed Locker is
// ErrClosed; a driver without records is ErrUnsupported, and a Semaphore
// over it still works, with the check of the permits' descriptions.
func TestResetSemaphoreErrors(t *testing.T) {
	ctx := context.Background()
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		l       *dlock.Locker
		key     string
		permits int
		want    error
	}{
		{"nil Locker", nil, "k", 2, dlock.ErrInvalidOption},
		{"no permits", l, "k", 0, dlock.ErrInvalidOption},
		{"too many permits", l, "k", dlock.MaxPermits + 1, dlock.ErrInvalidOption},
		{"empty key", l, "", 2, dlock.ErrInvalidKey},
	} {
		if _, err := c.l.ResetSemaphore(ctx, c.key, c.permits); !errors.Is(err, c.want) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.ResetSemaphore(cancelled, "k", 2); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v; want context.Canceled", err)
	}
	_ = l.Close()
	if _, err := l.ResetSemaphore(ctx, "k", 2); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("closed Locker: %v; want ErrClosed", err)
	}

	d := memory.NewStore().Driver()
	plain, err := dlock.NewLocker(noRecords{d, d.(driver.Inspector)})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.ResetSemaphore(ctx, "k", 2); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("a driver without records: %v; want ErrUnsupported", err)
	}
	two, _ := plain.NewSemaphore("k", 2)
	if err := two.Lock(ctx); err != nil {
		t.Fatalf("Acquire over a driver without records: %v", err)
	}
	three, _ := plain.NewSemaphore("k", 3)
	if err := three.TryLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("3 permits beside a holder of 2, without records: %v; want ErrInvalidOption (the descriptions' check)", err)
	}
	_ = two.Unlock(ctx)
}
