package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/observe"
)

// Lock, TryLock and Unlock raced against Close, many times: no call may
// leave a hold that Close did not release, and the race detector must stay
// quiet (Close's wait and the calls' registration share one mutex).
func TestCloseRaceStress(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	s := memory.NewStore()
	probe, err := memory.New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	ctx := context.Background()
	for r := 0; r < rounds; r++ {
		l, err := memory.New(s)
		if err != nil {
			t.Fatal(err)
		}
		var ms []*dlock.Mutex
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			m, err := l.NewMutex([]string{"a", "a", "b", "c"}[i])
			if err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch i {
				case 0:
					errs[i] = m.Lock(ctx)
				case 1:
					errs[i] = m.TryLock(ctx)
				default:
					if errs[i] = m.Lock(ctx); errs[i] == nil && i == 3 {
						errs[i] = m.Unlock(ctx)
					}
				}
			}()
		}
		if r%3 == 0 {
			time.Sleep(time.Duration(r%50) * time.Microsecond)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for i, m := range ms {
			if errs[i] != nil && !errors.Is(errs[i], dlock.ErrClosed) && !errors.Is(errs[i], dlock.ErrNotAcquired) {
				t.Fatalf("round %d: call %d racing Close: %v", r, i, errs[i])
			}
			if m.Token() != 0 || !isDone(m.Done()) {
				t.Fatalf("round %d: call %d (%v): the Mutex still holds after Close", r, i, errs[i])
			}
		}
		for _, k := range []string{"a", "b", "c"} {
			p, _ := probe.NewMutex(k)
			if err := p.TryLock(ctx); err != nil {
				t.Fatalf("round %d: key %s after Close: %v (a hold outlived Close)", r, k, err)
			}
			_ = p.Unlock(ctx)
		}
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// gated is a memory driver whose TryAcquire or Release can be held at a
// gate, and which records whether the portable layer closed it while a
// call was still inside.
type gated struct {
	driver.Locker
	acquireGate chan struct{} // TryAcquire waits for it when not nil
	releaseGate chan struct{} // Release waits for it when not nil
	entered     chan struct{} // receives when a gated call has entered
	inside      atomic.Int32
	closedEarly atomic.Bool // Close came while a call was inside
}

func (g *gated) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	g.inside.Add(1)
	defer g.inside.Add(-1)
	if g.acquireGate != nil {
		g.entered <- struct{}{}
		<-g.acquireGate
	}
	return g.Locker.TryAcquire(context.WithoutCancel(ctx), req)
}

func (g *gated) Release(ctx context.Context, h driver.Hold) error {
	g.inside.Add(1)
	defer g.inside.Add(-1)
	if g.releaseGate != nil {
		g.entered <- struct{}{}
		<-g.releaseGate
	}
	return g.Locker.Release(ctx, h)
}

func (g *gated) Close() error {
	if g.inside.Load() != 0 {
		g.closedEarly.Store(true)
	}
	return g.Locker.Close()
}

// waitClosing waits until Close has begun on l (NewMutex says ErrClosed).
func waitClosing(t *testing.T, l *dlock.Locker) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := l.NewMutex("probe"); errors.Is(err, dlock.ErrClosed) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Close never began")
		}
		time.Sleep(time.Millisecond)
	}
}

// An Unlock whose release is in flight when Close comes is waited for: the
// driver is not closed under it, and the lock is released.
func TestCloseWaitsForUnlockInFlight(t *testing.T) {
	s := memory.NewStore()
	g := &gated{Locker: s.Driver(), entered: make(chan struct{}, 1)}
	l, err := dlock.NewLocker(g)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := l.NewMutex("k")
	if err := m.Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	g.releaseGate = make(chan struct{})
	unlocked := make(chan error, 1)
	go func() { unlocked <- m.Unlock(context.Background()) }()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	waitClosing(t, l)
	time.Sleep(20 * time.Millisecond) // give a Close that does not wait the time to go wrong
	close(g.releaseGate)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if g.closedEarly.Load() {
		t.Fatal("Close closed the driver while an Unlock's release was in flight")
	}
	if err := <-unlocked; err != nil {
		t.Fatalf("Unlock in flight during Close: %v", err)
	}
	other, _ := memory.New(s)
	defer other.Close()
	p, _ := other.NewMutex("k")
	if err := p.TryLock(context.Background()); err != nil {
		t.Fatalf("key after Close: %v", err)
	}
}

// A lock granted to a call after Close began is given back by that call,
// before the driver is closed, and the call returns ErrClosed.
func TestGrantDuringCloseIsReleased(t *testing.T) {
	s := memory.NewStore()
	g := &gated{Locker: s.Driver(), entered: make(chan struct{}, 1), acquireGate: make(chan struct{})}
	l, err := dlock.NewLocker(g)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := l.NewMutex("k")
	locked := make(chan error, 1)
	go func() { locked <- m.TryLock(context.Background()) }()
	<-g.entered
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	waitClosing(t, l)
	close(g.acquireGate) // the grant arrives now
	if err := <-locked; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock granted during Close: %v; want ErrClosed", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if g.closedEarly.Load() {
		t.Fatal("Close closed the driver while an acquire was in flight")
	}
	other, _ := memory.New(s)
	defer other.Close()
	p, _ := other.NewMutex("k")
	if err := p.TryLock(context.Background()); err != nil {
		t.Fatalf("the grant made during Close was left on the server: %v", err)
	}
}

// Renewals that fail until the window runs out: the cause is
// ErrRenewalFailed, with the driver's error (ErrUnavailable) wrapped.
func TestLossCauseRenewalFailed(t *testing.T) {
	f, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(300*time.Millisecond))
	f.failRenew.Store(true)
	m := lockNew(t, l, "k")
	<-m.Done()
	err := m.Err()
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, dlock.ErrRenewalFailed) || !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Err after failed renewals: %v; want ErrLockLost, ErrRenewalFailed and the driver's ErrUnavailable", err)
	}
	if errors.Is(err, dlock.ErrLeaseExpired) || errors.Is(err, dlock.ErrReportedLost) || errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Err after failed renewals: %v; matches another cause too", err)
	}
	if !strings.Contains(err.Error(), "injected renewal failure") {
		t.Fatalf("Err %q does not carry the driver's detail", err)
	}
	if uerr := m.Unlock(context.Background()); !errors.Is(uerr, dlock.ErrRenewalFailed) {
		t.Fatalf("Unlock after failed renewals: %v; want the same cause", uerr)
	}
}

// endGate is an Observer whose HoldEnd for one key waits until released:
// it stalls the loss lane's worker, as a loaded machine delays it.
type endGate struct {
	noop
	key     string
	release chan struct{}
}

func (g endGate) HoldEnd(e observe.HoldEnd) {
	if e.Key == g.key {
		<-g.release
	}
}

// A hold whose renewals failed keeps that cause when the backend's own
// expiry of its lease is reported before the watchdog's loss lane gets to
// it (a busy process, a late timer): the report comes after the validity
// window the hold counted, so it is the expiry the watchdog would have
// declared, not news from the backend.
func TestLossCauseRenewalFailedWhenExpiryIsReportedFirst(t *testing.T) {
	gate := endGate{key: "a", release: make(chan struct{})}
	var once sync.Once
	open := func() { once.Do(func() { close(gate.release) }) }
	f, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(300*time.Millisecond), dlock.WithObserver(gate))
	t.Cleanup(open) // before the Locker's Close, which waits for a's end
	f.failRenew.Store(true)
	a := lockNew(t, l, "a")
	b := lockNew(t, l, "b")
	select {
	case <-b.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("b's Done still open 5s after its lease ended on the store")
	}
	open()
	<-a.Done()
	for name, m := range map[string]*dlock.Mutex{"a": a, "b": b} {
		err := m.Err()
		if !errors.Is(err, dlock.ErrRenewalFailed) || errors.Is(err, dlock.ErrReportedLost) {
			t.Errorf("%s: Err %v; want ErrRenewalFailed alone", name, err)
		}
	}
}

// renewGate is an endGate that also tells when a watchdog renewal of key
// "b" has ended.
type renewGate struct {
	endGate
	once    sync.Once
	renewed chan struct{}
}

func (g *renewGate) End(_ context.Context, c observe.Call, _ observe.Result) {
	if c.Op == observe.OpRenew && c.Watchdog && c.Key == "b" {
		g.once.Do(func() { close(g.renewed) })
	}
}

// A renewal that answers "not held" only after the hold's window ran down
// (a driver that does not heed its context) tells of the expiry too: the
// hold ends with ErrRenewalFailed, the renewal's answer as its detail.
func TestLossCauseNotHeldAfterWindow(t *testing.T) {
	gate := &renewGate{endGate: endGate{key: "a", release: make(chan struct{})}, renewed: make(chan struct{})}
	var once sync.Once
	open := func() { once.Do(func() { close(gate.release) }) }
	s := memory.NewStore()
	f := &faulty{Locker: s.Driver(), stuck: make(chan struct{}), stuckErr: fmt.Errorf("injected late answer: %w", driver.ErrNotHeld)}
	// A TTL long enough that the stuck renewals can be let go between the
	// loss margin and the store's own expiry (a tenth of it, 600ms: 300ms
	// on either side for a loaded machine's delays).
	const ttl = 6 * time.Second
	l, err := dlock.NewLocker(f, dlock.WithTTL(ttl), dlock.WithObserver(gate))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	t.Cleanup(open) // before Close, which waits for a's end
	var unstick sync.Once
	t.Cleanup(func() { unstick.Do(func() { close(f.stuck) }) })
	a := lockNew(t, l, "a")
	b := lockNew(t, l, "b")
	expires := b.Lease().Expires
	// Past b's loss margin, the loss lane is held by a's end; b's renewal
	// is still stuck. Let it answer, before the store expires b.
	time.Sleep(time.Until(expires.Add(-driver.LossMargin(ttl) / 2)))
	unstick.Do(func() { close(f.stuck) })
	// Any look at b (Done, Err) would declare it lost by its clock before
	// the renewal's answer is in: wait for the renewal's end first.
	select {
	case <-gate.renewed:
	case <-time.After(5 * time.Second):
		t.Fatal("b's renewal still not ended 5s after it was let go")
	}
	select {
	case <-b.Done():
	default:
		t.Fatal("b's Done still open after its renewal answered not held")
	}
	err = b.Err()
	if !errors.Is(err, dlock.ErrRenewalFailed) || errors.Is(err, dlock.ErrReportedLost) {
		t.Fatalf("b: Err %v; want ErrRenewalFailed alone", err)
	}
	if !strings.Contains(err.Error(), "injected late answer") {
		t.Fatalf("b: Err %q; want the renewal's answer as its detail", err)
	}
	open()
	<-a.Done()
}

// Do's context: Deadline is the lease's end and moves with renewal;
// context.Cause is ErrUnlocked once fn has returned.
func TestDoContextDeadlineFollowsLease(t *testing.T) {
	_, l := newFaulty(t, memory.NewStore(), dlock.WithTTL(time.Second), dlock.WithAutoRenew(false))
	m, _ := l.NewMutex("k")
	var inner context.Context
	err := dlock.Do(context.Background(), m, func(ctx context.Context) error {
		inner = ctx
		d1, ok := ctx.Deadline()
		if !ok || !d1.Equal(m.Lease().Expires) {
			t.Errorf("Deadline %v, %v; want Lease().Expires %v", d1, ok, m.Lease().Expires)
		}
		time.Sleep(10 * time.Millisecond)
		if err := m.Renew(ctx); err != nil {
			return err
		}
		if d2, _ := ctx.Deadline(); !d2.After(d1) {
			t.Errorf("Deadline after Renew %v; want later than %v", d2, d1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(context.Cause(inner), dlock.ErrUnlocked) {
		t.Fatalf("cause of Do's context after Do returned: %v; want ErrUnlocked", context.Cause(inner))
	}
}
