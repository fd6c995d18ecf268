// Package conformance is the correctness suite every dlock backend runs,
// identically, against real servers.
//
// A backend's test calls Run with a Harness that can make independent
// Lockers (separate connections or sessions, as separate processes would
// have), declares the backend's timing capabilities, and can break a lease
// from outside. A backend can tune timings through the Harness but cannot
// skip a case; the one exception is the unreachable-server case, which
// in-process backends have no server for.
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
//				return mybackend.New(ctx, endpoint, opts...)
//			},
//			NewDriver: func(ctx context.Context) (driver.Locker, error) {
//				return mybackend.OpenDriver(ctx, endpoint)
//			},
//			Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
//				return mybackend.New(ctx, addr)
//			},
//			BreakLease: func(ctx context.Context, key string) error { ... },
//			TTL:        time.Second,
//		})
//	}
//
// The cases, each a subtest of Run: LockUnlock, TryLockHeld, Exclusion,
// Fencing, Expiry, Renew, AutoRenew, Context, Handoff, Keys, Misuse, Close,
// Unavailable, BrokenLease, ManyKeys, and the portable contract's:
// OpenErrors, TTLLimit, PanicInDo, CloseRace, LockTimeoutClass, LossCutOff,
// UnlockEndedContext, PanicThenClose, UnlockAfterTakeover, LocksAfterLoss,
// HoldCause, PausedHold, CancelAtGrant, operating locks': Inspect,
// InspectQueue, InspectExpiry, Break, InspectErrors, multi-key locks':
// MultiLock, MultiPartial, MultiOverlap, MultiLoss, MultiClose,
// MultiLossWindow, semaphores': Semaphore, SemaphoreBound,
// SemaphoreExpiry, SemaphoreMismatch, SemaphoreRecord, SemaphoreClose,
// read-write locks' (rwmutex.go): RWMutexShare, RWMutexExclusion,
// RWMutexStarvation, RWMutexOrder, RWMutexFencing, RWMutexLoss,
// RWMutexExpiry, RWMutexClose, RWMutexErrors, the
// hold shape's, on a Mutex, a MultiMutex, a Semaphore and an Election
// alike: HoldShape, HoldShapeLoss, HoldShapeElection, and leader
// election's: ElectionOneLeader, ElectionBlocks, ElectionObserve,
// ElectionObserveShort, ElectionReplaced, ElectionFenced, ElectionErrors,
// and the driver's own contract, on Harness.NewDriver's drivers:
// DriverInterfaces, DriverRecord, DriverRecordKeys, DriverRecordRace,
// DriverClearRecordRace, DriverRecordApart, DriverRecordClosed,
// DriverRenewBatch, DriverOwnerChecked, and the minimum and maximum
// hold's: MinHoldUnlock, MinHoldClose, MinHoldPassed, MinHoldSemaphore,
// MaxHold, MinMaxErrors, and the line's (line.go): LineOrder,
// LineFairness. A backend tests in its own
// package only what is its own (a quorum, a store's layout, a failure
// of its servers), not these.
// RunBenchmarks measures the same backend: uncontended Lock+Unlock, parallel distinct keys, and contended
// handoff.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Harness connects the suite to one backend topology.
type Harness struct {
	// NewLocker returns a new, independent Locker: its own connections and
	// sessions, so that two Lockers behave like two processes. The suite
	// closes every Locker it makes. Options are defaults for its Mutexes.
	NewLocker func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error)

	// NewDriver returns a new, independent driver of the same backend and
	// store as NewLocker's Lockers (same prefix, directory or table): its
	// own connections and sessions, as another process's would be. The
	// Driver* cases check on it what a driver promises beyond the
	// portable Locker (driver.Recorder, driver.Inspector, each answer of
	// driver.BatchRenewer's RenewBatch, driver.OwnerCheckedRenewer), finding
	// the optional interfaces by type assertion; they fail on a driver
	// that lacks Inspector or Recorder. The suite closes every driver it
	// makes. Required.
	NewDriver func(ctx context.Context) (driver.Locker, error)

	// Unreachable opens a Locker from a URL naming addr, a TCP address that
	// accepts connections and never answers (a server that hangs), as
	// dlock.Open does (for a quorum backend, with every other instance
	// silent too). It must fail with an error matching
	// dlock.ErrUnavailable before its context ends. Nil only when
	// InProcess is true.
	Unreachable func(ctx context.Context, addr string) (*dlock.Locker, error)

	// BreakLease ends key's current hold from outside, as an operator or a
	// failure would: delete the key, revoke the lease, destroy the session.
	BreakLease func(ctx context.Context, key string) error

	// TTL is the lease used by the cases that wait for expiry or renewal. It
	// must be at least the backend's minimum TTL. Default 1s.
	TTL time.Duration

	// ExpiryGrace is how much longer than TTL the server may take to expire
	// a lease (Consul invalidates a session at up to 2*TTL, so TTL there).
	ExpiryGrace time.Duration

	// MaxTTL is the backend's largest TTL (driver.Limits.MaxTTL), if it
	// has one below dlock.MaxTTL: the long leases the suite asks for are
	// capped at it, and kept alive by the watchdog. Zero means
	// dlock.MaxTTL.
	MaxTTL time.Duration

	// SessionLease marks a backend whose lease is a session's, kept alive
	// by requests of its own (ZooKeeper): a hold's lease runs from the last
	// request of the session the server confirmed (driver.Hold.Since),
	// which may have been sent after Lock began. LockUnlock then bounds
	// Lease().Expires by the end of Lock plus TTL instead of its start.
	SessionLease bool

	// Queue marks a backend whose server keeps a queue of waiting
	// requests (etcd, ZooKeeper, Redis, Redlock's wake queues): Inspect's
	// Waiters counts them. Without
	// it, Waiters must be -1.
	Queue bool

	// InProcess marks a backend with no server (memory, file). It only
	// exempts the Unavailable case.
	InProcess bool

	// UnreachableClient, when not nil, returns a Locker over a client the
	// caller made for addr (a server that accepts connections and never
	// answers), through the backend's constructor that does not talk to
	// the server. Lock and TryLock on it must fail with ErrUnavailable.
	UnreachableClient func(ctx context.Context, addr string) (*dlock.Locker, error)

	// URL is a URL dlock.Open accepts for this backend (its own
	// parameters may be set; ttl and autorenew must not be). The
	// OpenErrors case adds bad parameters to it.
	URL string

	// CutOff, when not nil, returns a new Locker, as NewLocker does, and
	// the Link by which it reaches the store, so that the LossCutOff case
	// can cut it off. CutOffURL makes one for a backend whose URL names
	// every server a client talks to; a file backend cuts by holding its
	// files' locks. Nil only where no link can be cut: the memory backend
	// (the store is the Locker's own) and topologies whose clients find
	// their servers through another (Redis Cluster and Sentinel), which
	// run the case in the standalone topology of the same backend.
	CutOff func(t testing.TB, ctx context.Context, opts ...dlock.Option) (*dlock.Locker, Link, error)

	// CloseRounds is how many times the CloseRace case races calls against
	// Close (default 20; more for in-process backends, fewer for slow
	// servers).
	CloseRounds int
}

func (h Harness) ttl() time.Duration {
	if h.TTL <= 0 {
		return time.Second
	}
	return h.TTL
}

// longTTL is a lease the suite never expects to expire during a case.
func (h Harness) longTTL() time.Duration {
	long := max(30*time.Second, 3*h.ttl())
	if h.MaxTTL > 0 {
		long = min(long, h.MaxTTL)
	}
	return long
}

// slack absorbs scheduling noise on busy machines (race detector, 2 cores).
// It bounds hangs; it is not a speed requirement.
const slack = 5 * time.Second

// Run runs every conformance case as a subtest of t.
func Run(t *testing.T, h Harness) {
	if h.NewLocker == nil || h.NewDriver == nil || h.BreakLease == nil || h.URL == "" {
		t.Fatal("conformance: Harness needs NewLocker, NewDriver, BreakLease and URL")
	}
	if h.Unreachable == nil && !h.InProcess {
		t.Fatal("conformance: Harness needs Unreachable unless InProcess")
	}
	s := &suite{h: h, run: randomID()}
	cases := []struct {
		name     string
		parallel bool // waits on leases: runs alongside the others
		fn       func(t *testing.T)
	}{
		{"LockUnlock", false, s.lockUnlock},
		{"TryLockHeld", false, s.tryLockHeld},
		{"Exclusion", false, s.exclusion},
		{"Fencing", true, s.fencing},
		{"Expiry", true, s.expiry},
		{"Renew", true, s.renew},
		// Serial: it counts the process's goroutines, which the parallel
		// cases' Lockers would add to.
		{"AutoRenew", false, s.autoRenew},
		{"Context", false, s.context},
		{"Handoff", false, s.handoff},
		{"Keys", false, s.keys},
		{"Misuse", false, s.misuse},
		{"Close", false, s.close},
		{"Unavailable", false, s.unavailable},
		{"BrokenLease", true, s.brokenLease},
		{"ManyKeys", false, s.manyKeys},
		{"Inspect", false, s.inspect},
		{"InspectQueue", false, s.inspectQueue},
		{"InspectExpiry", true, s.inspectExpiry},
		{"Break", true, s.breakHold},
		{"InspectErrors", false, s.inspectErrors},
		{"OpenErrors", false, s.openErrors},
		{"TTLLimit", false, s.ttlLimit},
		{"PanicInDo", false, s.panicInDo},
		{"CloseRace", false, s.closeRace},
		{"LockTimeoutClass", false, s.lockTimeoutClass},
		{"LossCutOff", false, s.lossCutOff},
		{"UnlockEndedContext", false, s.unlockEndedContext},
		{"PanicThenClose", false, s.panicThenClose},
		// Serial although they wait on leases: they open and close
		// clients, which AutoRenew's goroutine count, taken beside the
		// parallel cases, would see.
		{"UnlockAfterTakeover", false, s.unlockAfterTakeover},
		{"LocksAfterLoss", false, s.locksAfterLoss},
		{"HoldCause", false, s.holdCause},
		// Stops the whole process for a moment: runs alone, before the
		// parallel cases.
		{"PausedHold", false, s.pausedHold},
		{"CancelAtGrant", false, s.cancelAtGrant},
		// Multi-key locks and semaphores (multi.go, semaphore.go): serial,
		// since they open and close Lockers.
		{"MultiLock", false, s.multiLock},
		{"MultiPartial", false, s.multiPartial},
		{"MultiOverlap", false, s.multiOverlap},
		{"MultiLoss", false, s.multiLoss},
		{"MultiClose", false, s.multiClose},
		{"MultiLossWindow", false, s.multiLossWindow},
		{"Semaphore", false, s.semaphore},
		{"SemaphoreBound", false, s.semaphoreBound},
		{"SemaphoreExpiry", false, s.semaphoreExpiry},
		{"SemaphoreMismatch", false, s.semaphoreMismatch},
		{"SemaphoreRecord", false, s.semaphoreRecord},
		{"SemaphoreClose", false, s.semaphoreClose},
		// The one hold shape (shape.go): serial, since they open and
		// close Lockers.
		{"HoldShape", false, s.holdShape},
		{"HoldShapeLoss", false, s.holdShapeLoss},
		{"HoldShapeElection", false, s.holdShapeElection},
	}
	// Leader election (election.go) and read-write locks (rwmutex.go):
	// serial, since they count goroutines and close Lockers. The driver-level contract (driver.go): serial,
	// since they open and close drivers; the ones that wait on a lease
	// run in parallel inside.
	// The minimum and maximum hold (minhold.go): serial, since they open
	// and close Lockers.
	// The line (line.go): serial, since they open Lockers and count on
	// the key's waiters.
	for _, c := range append(append(append(append(s.electionCases(), s.rwmutexCases()...), s.driverCases()...), s.minMaxCases()...), s.lineCases()...) {
		cases = append(cases, struct {
			name     string
			parallel bool
			fn       func(t *testing.T)
		}{c.name, false, c.fn})
	}
	for _, c := range cases {
		if c.name == "Unavailable" && h.InProcess {
			continue // no server to be unreachable
		}
		if c.name == "LossCutOff" && h.CutOff == nil {
			continue // no link to cut (see Harness.CutOff)
		}
		t.Run(c.name, func(t *testing.T) {
			if c.parallel {
				t.Parallel()
			}
			c.fn(t)
		})
	}
}

// RunElection runs only the election cases (the Election* subtests of Run),
// for a topology that runs the rest of the suite elsewhere (Redis through
// Sentinel, whose Mutex is the standalone one's).
func RunElection(t *testing.T, h Harness) {
	if h.NewLocker == nil || h.BreakLease == nil || h.URL == "" {
		t.Fatal("conformance: Harness needs NewLocker, BreakLease and URL")
	}
	s := &suite{h: h, run: randomID()}
	for _, c := range s.electionCases() {
		t.Run(c.name, c.fn)
	}
}

type namedCase struct {
	name string
	fn   func(t *testing.T)
}

func (s *suite) electionCases() []namedCase {
	return []namedCase{
		{"ElectionOneLeader", s.electionOneLeader},
		{"ElectionBlocks", s.electionBlocks},
		{"ElectionObserve", s.electionObserve},
		{"ElectionObserveShort", s.electionObserveShort},
		{"ElectionReplaced", s.electionReplaced},
		{"ElectionFenced", s.electionFenced},
		{"ElectionErrors", s.electionErrors},
	}
}

type suite struct {
	h   Harness
	run string // distinguishes this run's keys from every other run's
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// key returns a key unique to this run and case.
func (s *suite) key(t testing.TB, suffix string) string {
	return "dlock-conformance/" + s.run + "/" + t.Name() + "/" + suffix
}

// locker makes a Locker that is closed when the test ends.
func (s *suite) locker(t testing.TB, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := s.h.NewLocker(ctx, opts...)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func mustMutex(t testing.TB, l *dlock.Locker, key string, opts ...dlock.Option) *dlock.Mutex {
	t.Helper()
	m, err := l.NewMutex(key, opts...)
	if err != nil {
		t.Fatalf("NewMutex(%q): %v", key, err)
	}
	return m
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitShort calls lock, a wait on a key held elsewhere, with a context
// that ends after 300 ms (cancelled rather than past a deadline if
// cancel is set), and reports by how much it overran its wait and what it
// returned. A call that ended without any answer from the backend
// (ErrUnavailable with the context's error) says nothing about how a
// wait that outlasts its context is reported, and a loaded machine may
// not answer within 300 ms, so such a call is made again with 1 s, then
// 3 s. A backend that never answers, or a Locker that misreports an
// answered wait as ErrUnavailable, still fails on the last call.
func waitShort(cancel bool, lock func(context.Context) error) (overrun time.Duration, err error) {
	for _, wait := range []time.Duration{300 * time.Millisecond, time.Second, 3 * time.Second} {
		var (
			ctx  context.Context
			stop context.CancelFunc
		)
		if cancel {
			ctx, stop = context.WithCancel(context.Background())
			time.AfterFunc(wait, stop)
		} else {
			ctx, stop = context.WithTimeout(context.Background(), wait)
		}
		start := time.Now()
		err = lock(ctx)
		overrun = time.Since(start) - wait
		stop()
		if !errors.Is(err, dlock.ErrUnavailable) || !errors.Is(err, ctx.Err()) {
			break
		}
	}
	return overrun, err
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
