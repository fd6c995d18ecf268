package dlock_test

import (
	"context"
	"errors"
	"github.com/dlock-go/dlock/observe"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// inspecting is the faulty driver with the memory store's Inspector, so
// that an Election can run on it.
type inspecting struct {
	*faulty
	driver.Inspector
}

func newInspecting(t *testing.T, s *memory.Store, opts ...dlock.Option) (*faulty, *dlock.Locker) {
	t.Helper()
	f := &faulty{Locker: s.Driver()}
	l, err := dlock.NewLocker(inspecting{f, s.Driver().(driver.Inspector)}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return f, l
}

// A driver that cannot inspect keys cannot hold an election: NewElection
// says so with errors.ErrUnsupported.
func TestElectionNeedsInspector(t *testing.T) {
	s := memory.NewStore()
	_, blind := newFaulty(t, s) // the memory driver without its Inspector
	if _, err := blind.NewElection("e"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("NewElection over a driver that cannot inspect: %v; want errors.ErrUnsupported", err)
	}
}

// A leader whose renewals fail is told (Done closes, Term reads 0) before
// the next candidate can win: the next Campaign returns only after the
// server let the lease go, which is after the loss was declared.
func TestElectionLossToldBeforeNextLeader(t *testing.T) {
	// The loss margin (a tenth of the TTL) must outlast the delays of a
	// loaded machine in running the watchdog.
	s := memory.NewStore()
	f, la := newInspecting(t, s, dlock.WithTTL(2*time.Second))
	lb, err := memory.New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer lb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := la.NewElection("e")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	termA := a.Token()
	f.failRenew.Store(true)
	b, err := lb.NewElection("e", dlock.WithTTL(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Campaign(ctx, "b"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("the next leader won while the lost leader's Done was still open")
	}
	if !errors.Is(a.Err(), dlock.ErrLockLost) || !errors.Is(a.Err(), dlock.ErrRenewalFailed) {
		t.Fatalf("lost leader's Err: %v; want ErrLockLost and ErrRenewalFailed", a.Err())
	}
	if a.Token() != 0 || b.Token() <= termA {
		t.Fatalf("terms: lost leader %d, next %d; want 0 and above %d", a.Token(), b.Token(), termA)
	}
}

// Two Campaigns of one Election at once: the second is refused while the
// first waits, and a leader cannot campaign again.
func TestElectionCampaignInProgress(t *testing.T) {
	s := memory.NewStore()
	l1, _ := memory.New(s)
	l2, _ := memory.New(s)
	defer l1.Close()
	defer l2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, _ := l1.NewElection("e")
	if err := holder.Campaign(ctx, "holder"); err != nil {
		t.Fatal(err)
	}
	waiting := &stepSignal{ch: make(chan struct{}, 1)}
	e, _ := l2.NewElection("e", dlock.WithObserver(waiting))
	first := make(chan error, 1)
	go func() { first <- e.Campaign(ctx, "first") }()
	<-waiting.ch // the first Campaign waits on the backend
	short, c := context.WithTimeout(ctx, time.Second)
	err := e.Campaign(short, "second")
	c()
	if !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("second Campaign of one Election while the first waits: %v; want ErrAlreadyHeld", err)
	}
	select {
	case err := <-first:
		t.Fatalf("first Campaign returned (%v) while another candidate leads", err)
	default:
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatalf("first Campaign after the holder resigned: %v", err)
	}
	if e.Value() != "first" {
		t.Fatalf("Value %q; want first", e.Value())
	}
	if err := e.Campaign(ctx, "again"); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("Campaign by the leader: %v; want ErrAlreadyHeld", err)
	}
}

// stepSignal tells when a Lock's wait has begun.
type stepSignal struct{ ch chan struct{} }

func (s *stepSignal) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (s *stepSignal) Step(context.Context, observe.Call, observe.Step) {
	select {
	case s.ch <- struct{}{}:
	default:
	}
}
func (s *stepSignal) End(context.Context, observe.Call, observe.Result) {}
func (s *stepSignal) HoldEnd(observe.HoldEnd)                           {}
