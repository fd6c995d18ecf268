package dlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// faulty wraps the memory driver to inject the failures the portable layer
// must handle: renewals that fail, a server that never answers, and a count
// of concurrent watches.
type faulty struct {
	driver.Locker
	failRenew atomic.Bool
	hang      atomic.Bool
	stuck     chan struct{} // when not nil, Renew blocks until it is closed, ignoring ctx
	stuckErr  error         // what a stuck Renew returns; nil for an injected unavailability
	stale     atomic.Bool   // grants report a lease last extended two TTLs ago
	renews    atomic.Int32
	watches   atomic.Int32
	maxWatch  atomic.Int32
}

func (f *faulty) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if f.hang.Load() {
		<-ctx.Done()
		return driver.Hold{}, ctx.Err()
	}
	h, err := f.Locker.TryAcquire(ctx, req)
	if err == nil && f.stale.Load() {
		h.Since = time.Now().Add(-2 * req.TTL)
	}
	return h, err
}

func (f *faulty) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	f.renews.Add(1)
	if f.stuck != nil {
		<-f.stuck
		if f.stuckErr != nil {
			return 0, f.stuckErr
		}
		return 0, driver.Unavailable(errors.New("injected stuck renewal"))
	}
	if f.failRenew.Load() {
		return 0, driver.Unavailable(errors.New("injected renewal failure"))
	}
	return f.Locker.Renew(ctx, h)
}

func (f *faulty) Watch(ctx context.Context, key string) (driver.Watch, error) {
	w, err := f.Locker.Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	n := f.watches.Add(1)
	for {
		m := f.maxWatch.Load()
		if n <= m || f.maxWatch.CompareAndSwap(m, n) {
			break
		}
	}
	return &countedWatch{Watch: w, f: f}, nil
}

type countedWatch struct {
	driver.Watch
	f    *faulty
	once sync.Once
}

func (w *countedWatch) Close() error {
	w.once.Do(func() { w.f.watches.Add(-1) })
	return w.Watch.Close()
}

func newFaulty(t *testing.T, s *memory.Store, opts ...dlock.Option) (*faulty, *dlock.Locker) {
	t.Helper()
	f := &faulty{Locker: s.Driver()}
	l, err := dlock.NewLocker(f, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return f, l
}

func lockNew(t *testing.T, l *dlock.Locker, key string, opts ...dlock.Option) *dlock.Mutex {
	t.Helper()
	m, err := l.NewMutex(key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

// When renewals keep failing, Done closes and Do's context is cancelled
// before the validity window ends, not after.
func TestWatchdogDeclaresLossBeforeExpiry(t *testing.T) {
	// A TTL long enough that the loss margin (a tenth) outlasts the delays
	// of a loaded machine in waking this test.
	f, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(2*time.Second))
	f.failRenew.Store(true)
	m, _ := l.NewMutex("k")
	var expires, cancelled time.Time
	err := dlock.Do(context.Background(), m, func(ctx context.Context) error {
		expires = m.Lease().Expires
		<-ctx.Done()
		cancelled = time.Now()
		if !errors.Is(context.Cause(ctx), dlock.ErrLockLost) {
			t.Errorf("cause %v; want ErrLockLost", context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Do = %v; want ErrLockLost", err)
	}
	if !cancelled.Before(expires) {
		t.Fatalf("context cancelled %v after the validity window ended", cancelled.Sub(expires))
	}
	if n := f.renews.Load(); n < 2 {
		t.Fatalf("%d renewal attempts; want the watchdog to retry", n)
	}
}

// A renewal that never returns (a server that stopped answering, a driver
// that does not watch its context) must not hold the loss back: Done still
// closes before the validity window ends.
func TestWatchdogLosesWhileRenewalHangs(t *testing.T) {
	s := memory.NewStore()
	f := &faulty{Locker: s.Driver(), stuck: make(chan struct{})}
	l, err := dlock.NewLocker(f, dlock.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// Unblock the renewal before Close waits for it.
	t.Cleanup(func() { _ = l.Close() })
	t.Cleanup(func() { close(f.stuck) })
	m := lockNew(t, l, "k")
	expires := m.Lease().Expires
	select {
	case <-m.Done():
	case <-time.After(time.Until(expires) + 5*time.Second):
		t.Fatal("Done never closed while the renewal hung")
	}
	if lost := time.Now(); !lost.Before(expires) {
		t.Fatalf("Done closed %v after the validity window ended", lost.Sub(expires))
	}
	if f.renews.Load() == 0 {
		t.Fatal("no renewal was attempted")
	}
}

// A grant whose validity window is already over (its lease was last
// extended long before the grant) is never reported acquired: the lock is
// given back and the caller sees ErrUnavailable.
func TestStaleGrantIsNotAcquired(t *testing.T) {
	s := memory.NewStore()
	f, l := newFaulty(t, s, dlock.WithTTL(time.Second))
	f.stale.Store(true)
	m, _ := l.NewMutex("k")
	err := m.TryLock(context.Background())
	if !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("TryLock with a stale grant = %v; want ErrUnavailable", err)
	}
	if m.Token() != 0 {
		t.Fatalf("Token = %d after a refused grant", m.Token())
	}
	// The grant was given back: the key is free for another Locker.
	_, other := newFaulty(t, s, dlock.WithTTL(time.Second))
	m2, _ := other.NewMutex("k")
	if err := m2.TryLock(context.Background()); err != nil {
		t.Fatalf("the stale grant was not released: %v", err)
	}
	_ = m2.Unlock(context.Background())
}

// A renewal failure that heals within the window costs nothing.
func TestWatchdogSurvivesTransientFailure(t *testing.T) {
	const ttl = 600 * time.Millisecond
	f, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(ttl))
	m := lockNew(t, l, "k")
	f.failRenew.Store(true)
	time.Sleep(driver.RenewInterval(ttl) + 50*time.Millisecond) // the first renewal fails
	f.failRenew.Store(false)
	time.Sleep(1500 * time.Millisecond)
	select {
	case <-m.Done():
		t.Fatal("hold declared lost although renewals recovered in time")
	default:
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// After Unlock the watchdog renews nothing.
func TestWatchdogStopsAtUnlock(t *testing.T) {
	f, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(150*time.Millisecond))
	m := lockNew(t, l, "k")
	time.Sleep(200 * time.Millisecond)
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.renews.Load()
	if n == 0 {
		t.Fatal("no renewal while held")
	}
	time.Sleep(500 * time.Millisecond)
	if got := f.renews.Load(); got != n {
		t.Fatalf("%d renewals after Unlock", got-n)
	}
}

// With auto-renew off, Done closes when the validity window ends.
func TestNoAutoRenewLosesAtValidityEnd(t *testing.T) {
	f, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(time.Second), dlock.WithAutoRenew(false))
	m := lockNew(t, l, "k")
	exp := m.Lease().Expires
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the lease")
	}
	if time.Now().After(exp) {
		t.Fatalf("Done closed %v after Expires", time.Since(exp))
	}
	if f.renews.Load() != 0 {
		t.Fatal("renewed with auto-renew off")
	}
	if err := m.Unlock(context.Background()); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after loss = %v; want ErrLockLost", err)
	}
}

// Waiters of one Locker share one backend watch.
func TestWaitersShareOneWatch(t *testing.T) {
	s := memory.NewStore()
	_, holderL := newFaulty(t, s)
	f, l := newFaulty(t, s)
	holder := lockNew(t, holderL, "k")
	const waiters = 6
	var wg sync.WaitGroup
	var got atomic.Int32
	for i := 0; i < waiters; i++ {
		m, _ := l.NewMutex("k")
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(context.Background()); err != nil {
				t.Error(err)
				return
			}
			got.Add(1)
			_ = m.Unlock(context.Background())
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := holder.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got.Load() != waiters {
		t.Fatalf("%d of %d waiters acquired", got.Load(), waiters)
	}
	if n := f.maxWatch.Load(); n != 1 {
		t.Fatalf("%d concurrent backend watches for one key in one Locker; want 1", n)
	}
}

// A server that never answers: the error matches both ErrUnavailable and
// the deadline. Waiting on a held key past the deadline is not
// "unavailable".
func TestUnansweredVersusHeld(t *testing.T) {
	s := memory.NewStore()
	f, l := newFaulty(t, s)
	_, other := newFaulty(t, s)
	f.hang.Store(true)
	m, _ := l.NewMutex("k")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := m.Lock(ctx)
	if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a silent backend = %v; want ErrUnavailable and DeadlineExceeded", err)
	}
	f.hang.Store(false)

	holder := lockNew(t, other, "k")
	defer func() { _ = holder.Unlock(context.Background()) }()
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	err = m.Lock(ctx2)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Lock on a held key past its deadline = %v; want DeadlineExceeded only", err)
	}
}

// A Mutex whose hold was lost can Lock again without an Unlock first.
func TestLockAfterLoss(t *testing.T) {
	s := memory.NewStore()
	_, l := newFaulty(t, s)
	m := lockNew(t, l, "k")
	first := m.Token()
	s.Break("k")
	<-m.Done()
	if err := m.Lock(context.Background()); err != nil {
		t.Fatalf("Lock after loss = %v", err)
	}
	if m.Token() <= first {
		t.Fatalf("token %d after re-Lock; want > %d", m.Token(), first)
	}
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Do returns fn's error and always unlocks.
func TestDoUnlocksOnError(t *testing.T) {
	s := memory.NewStore()
	_, l := newFaulty(t, s)
	m, _ := l.NewMutex("k")
	boom := errors.New("boom")
	if err := dlock.Do(context.Background(), m, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do = %v; want fn's error", err)
	}
	if err := m.TryLock(context.Background()); err != nil {
		t.Fatalf("key still held after Do: %v", err)
	}
	_ = m.Unlock(context.Background())
}

func TestNewLockerRejectsBadDefaults(t *testing.T) {
	if _, err := dlock.NewLocker(nil); err == nil {
		t.Fatal("NewLocker(nil) succeeded")
	}
	if _, err := dlock.NewLocker(memory.NewStore().Driver(), dlock.WithTTL(-1)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("NewLocker with TTL -1 = %v; want ErrInvalidOption", err)
	}
}

// limited gives the memory driver the TTL bounds of a backend that can
// honour only some TTLs.
type limited struct {
	driver.Locker
	lim driver.Limits
}

func (l limited) Limits() driver.Limits { return l.lim }

// When no TTL is given, the default is brought within the backend's limits
// (a ZooKeeper lease is its session timeout, often below DefaultTTL); a
// TTL given with WithTTL is never adjusted, and one out of bounds is
// refused with ErrInvalidOption.
func TestDefaultTTLWithinLimits(t *testing.T) {
	for _, lim := range []driver.Limits{
		{MinTTL: 2 * time.Second, MaxTTL: 2 * time.Second},
		{MaxTTL: 10 * time.Second},
		{MinTTL: time.Minute},
	} {
		want := min(max(dlock.DefaultTTL, lim.MinTTL), max(lim.MaxTTL, lim.MinTTL))
		l, err := dlock.NewLocker(limited{Locker: memory.NewStore().Driver(), lim: lim})
		if err != nil {
			t.Fatalf("%+v: NewLocker with no TTL: %v", lim, err)
		}
		m, err := l.NewMutex("k")
		if err != nil {
			t.Fatalf("%+v: NewMutex with no TTL: %v", lim, err)
		}
		if err := m.Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := m.Lease().TTL; got != want {
			t.Errorf("%+v: default TTL %v; want %v", lim, got, want)
		}
		_ = m.Unlock(context.Background())
		for _, bad := range []time.Duration{lim.MinTTL - time.Second, lim.MaxTTL + time.Second} {
			if bad <= 0 || lim.MaxTTL == 0 && bad > lim.MinTTL {
				continue
			}
			if _, err := l.NewMutex("k", dlock.WithTTL(bad)); !errors.Is(err, dlock.ErrInvalidOption) {
				t.Errorf("%+v: NewMutex(WithTTL(%v)): %v; want ErrInvalidOption", lim, bad, err)
			}
			if _, err := dlock.NewLocker(limited{Locker: memory.NewStore().Driver(), lim: lim}, dlock.WithTTL(bad)); !errors.Is(err, dlock.ErrInvalidOption) {
				t.Errorf("%+v: NewLocker(WithTTL(%v)): %v; want ErrInvalidOption", lim, bad, err)
			}
		}
		_ = l.Close()
	}
}
