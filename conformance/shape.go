package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// The hold shape cases: a Mutex, a MultiMutex, a Semaphore's permit, an
// Election's term, an RWMutex's write hold and, through RLocker, its read
// hold are each a dlock.Lockable, and each behaves as one under
// Do, Renew, Unlock and TryLock, on every backend.

// lockable is one kind of Lockable the hold shape cases run over.
type lockable struct {
	name string
	// make returns a new Lockable of this kind on l, on the case's
	// resource (the same resource for every call within one subtest).
	make func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable
	// holders is how many holders the resource takes at once.
	holders int
	// tokens returns the fencing tokens of x's hold, each with the key it
	// fences: tokens of one key compare, tokens of two keys do not.
	tokens func(x dlock.Lockable) map[string]dlock.Token
	// breakHold ends x's hold from outside, through the Locker other.
	breakHold func(t *testing.T, ctx context.Context, other *dlock.Locker, x dlock.Lockable) error
}

// lockables returns the kinds, each on resources unique to the subtest
// that calls make.
func (s *suite) lockables() []lockable {
	// The RWMutex behind each reader's RLocker.
	var readers sync.Map // dlock.Lockable -> *dlock.RWMutex
	readerOf := func(x dlock.Lockable) *dlock.RWMutex {
		rw, _ := readers.Load(x)
		return rw.(*dlock.RWMutex)
	}
	breakKey := func(key func(dlock.Lockable) string) func(*testing.T, context.Context, *dlock.Locker, dlock.Lockable) error {
		return func(_ *testing.T, ctx context.Context, other *dlock.Locker, x dlock.Lockable) error {
			k := key(x)
			info, err := other.Break(ctx, k)
			if err != nil {
				return fmt.Errorf("Break(%q): %w", k, err)
			}
			if !info.Held {
				return fmt.Errorf("Break(%q): %+v; want the hold that was broken", k, info)
			}
			return nil
		}
	}
	return []lockable{
		{
			name: "Mutex",
			make: func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable {
				return mustMutex(t, l, s.key(t, "m"), opts...)
			},
			holders: 1,
			tokens: func(x dlock.Lockable) map[string]dlock.Token {
				m := x.(*dlock.Mutex)
				return map[string]dlock.Token{m.Key(): m.Token()}
			},
			// The harness's own way to break a lease, for one kind.
			breakHold: func(t *testing.T, ctx context.Context, _ *dlock.Locker, x dlock.Lockable) error {
				return s.h.BreakLease(ctx, x.(*dlock.Mutex).Key())
			},
		},
		{
			name: "MultiMutex",
			make: func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable {
				return mustMulti(t, l, []string{s.key(t, "a"), s.key(t, "b"), s.key(t, "c")}, opts...)
			},
			holders: 1,
			tokens: func(x dlock.Lockable) map[string]dlock.Token {
				return x.(*dlock.MultiMutex).Tokens()
			},
			// One key of the set, and that key's hold only.
			breakHold: breakKey(func(x dlock.Lockable) string { return x.(*dlock.MultiMutex).Keys()[1] }),
		},
		{
			name: "Semaphore",
			make: func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable {
				return mustSem(t, l, s.key(t, "sem"), 2, opts...)
			},
			holders: 2,
			tokens: func(x dlock.Lockable) map[string]dlock.Token {
				sm := x.(*dlock.Semaphore)
				return map[string]dlock.Token{sm.PermitKey(): sm.Token()}
			},
			breakHold: breakKey(func(x dlock.Lockable) string { return x.(*dlock.Semaphore).PermitKey() }),
		},
		{
			name: "Election",
			make: func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable {
				return mustElection(t, l, s.key(t, "e"), opts...)
			},
			holders: 1,
			tokens: func(x dlock.Lockable) map[string]dlock.Token {
				e := x.(*dlock.Election)
				return map[string]dlock.Token{e.Key(): e.Token()}
			},
			breakHold: breakKey(func(x dlock.Lockable) string { return x.(*dlock.Election).Key() }),
		},
		{
			name: "RWMutex",
			make: func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable {
				return mustRW(t, l, s.key(t, "rw"), 2, opts...)
			},
			holders: 1,
			tokens: func(x dlock.Lockable) map[string]dlock.Token {
				rw := x.(*dlock.RWMutex)
				return map[string]dlock.Token{rw.GateKey(): rw.Token()}
			},
			breakHold: breakKey(func(x dlock.Lockable) string { return x.(*dlock.RWMutex).GateKey() }),
		},
		{
			name: "RWMutexReader",
			make: func(t *testing.T, l *dlock.Locker, opts ...dlock.Option) dlock.Lockable {
				rw := mustRW(t, l, s.key(t, "rw"), 2, opts...)
				x := rw.RLocker()
				readers.Store(x, rw)
				return x
			},
			holders: 2,
			// A reader's token is a gate token: readers' tokens compare.
			tokens: func(x dlock.Lockable) map[string]dlock.Token {
				return map[string]dlock.Token{readerOf(x).GateKey(): x.Token()}
			},
			// The reader's slot, the only one held when it is broken.
			breakHold: func(t *testing.T, ctx context.Context, other *dlock.Locker, x dlock.Lockable) error {
				k := heldSlot(t, ctx, other, readerOf(x))
				_, err := other.Break(ctx, k)
				return err
			},
		},
	}
}

// checkHolds fails unless x holds: a token, a valid lease, Done open, no Err.
func checkHolds(t *testing.T, what string, x dlock.Lockable) {
	t.Helper()
	if x.Token() == 0 || !x.Lease().Valid() || x.Lease().Token != x.Token() || isClosed(x.Done()) || x.Err() != nil {
		t.Fatalf("%s: Token %d, Lease %+v, Done closed %v, Err %v; want held: a token, the lease's, valid, Done open, nil Err",
			what, x.Token(), x.Lease(), isClosed(x.Done()), x.Err())
	}
}

// checkUnlocked fails unless x's hold ended by Unlock.
func checkUnlocked(t *testing.T, what string, x dlock.Lockable) {
	t.Helper()
	if x.Token() != 0 || x.Lease().Valid() || !isClosed(x.Done()) || !errors.Is(x.Err(), dlock.ErrUnlocked) {
		t.Fatalf("%s: Token %d, Lease valid %v, Done closed %v, Err %v; want 0, invalid, closed, ErrUnlocked",
			what, x.Token(), x.Lease().Valid(), isClosed(x.Done()), x.Err())
	}
}

// checkTakeable fails unless y, on another Locker, can take the resource
// at once (TryLock), and gives it back.
func checkTakeable(t *testing.T, ctx context.Context, what string, y dlock.Lockable) {
	t.Helper()
	if err := y.TryLock(ctx); err != nil {
		t.Fatalf("TryLock by another Locker %s: %v; want it taken", what, err)
	}
	checkHolds(t, "another Locker's hold "+what, y)
	if err := y.Unlock(ctx); err != nil {
		t.Fatalf("Unlock by another Locker %s: %v", what, err)
	}
}

// HoldShape: for each of Mutex, MultiMutex, Semaphore, Election and
// RWMutex (writer and reader), Do runs fn with the hold taken (a token, a
// valid lease, its context's Deadline the lease's end) and unlocks when fn
// returns and when it panics (the panic goes on); Renew moves the lease's
// end forward while held and returns ErrNotHeld when not; Unlock when not
// held returns ErrNotHeld; TryLock while another Locker holds returns
// ErrNotAcquired; the next holder's token is strictly greater.
func (s *suite) holdShape(t *testing.T) {
	for _, k := range s.lockables() {
		t.Run(k.name, func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			l1, l2 := s.locker(t), s.locker(t)

			// Not held: Renew and Unlock say so.
			x := k.make(t, l1, dlock.WithTTL(s.h.longTTL()), dlock.WithAutoRenew(false))
			if err := x.Renew(ctx); !errors.Is(err, dlock.ErrNotHeld) {
				t.Fatalf("Renew before Lock: %v; want ErrNotHeld", err)
			}
			if err := x.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
				t.Fatalf("Unlock before Lock: %v; want ErrNotHeld", err)
			}

			// Renew, with the watchdog off: only Renew can move the end.
			if err := x.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			checkHolds(t, "after Lock", x)
			before := x.Lease()
			time.Sleep(100 * time.Millisecond)
			if err := x.Renew(ctx); err != nil {
				t.Fatalf("Renew while held: %v", err)
			}
			if after := x.Lease(); !after.Expires.After(before.Expires) || after.Token != before.Token {
				t.Fatalf("Lease after Renew %+v; before %+v; want the same token, a later end", after, before)
			}
			checkHolds(t, "after Renew", x)

			// TryLock while held elsewhere (the fillers hold every
			// other permit until the end), then the next holder's token.
			var fillers []dlock.Lockable
			for range k.holders - 1 {
				f := k.make(t, l2, dlock.WithTTL(s.h.longTTL()))
				if err := f.TryLock(ctx); err != nil {
					t.Fatalf("TryLock of a free hold: %v", err)
				}
				fillers = append(fillers, f)
			}
			y := k.make(t, l2, dlock.WithTTL(s.h.longTTL()))
			if err := y.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryLock while another Locker holds: %v; want ErrNotAcquired", err)
			}
			if y.Token() != 0 || !isClosed(y.Done()) {
				t.Fatalf("after a failed TryLock: Token %d, Done closed %v; want 0, closed", y.Token(), isClosed(y.Done()))
			}
			old := k.tokens(x)
			if err := x.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			checkUnlocked(t, "after Unlock", x)
			if err := x.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
				t.Fatalf("second Unlock: %v; want ErrNotHeld", err)
			}
			if err := x.Renew(ctx); !errors.Is(err, dlock.ErrNotHeld) {
				t.Fatalf("Renew after Unlock: %v; want ErrNotHeld", err)
			}
			if err := y.TryLock(ctx); err != nil {
				t.Fatalf("TryLock after the holder unlocked: %v", err)
			}
			next, common := k.tokens(y), 0
			for key, tok := range next {
				if prev, ok := old[key]; ok {
					common++
					if tok <= prev {
						t.Fatalf("next holder's token for %q: %d after %d; want strictly greater", key, tok, prev)
					}
				}
			}
			if common == 0 {
				t.Fatalf("next holder's tokens %v share no key with the last holder's %v", next, old)
			}
			if err := y.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}

			// Do: fn runs with the hold taken, under a context whose
			// Deadline is the lease's end (ctx's own deadline is later),
			// and Do unlocks on return.
			ctx = ctxFor(t, s.h.longTTL()+time.Minute)
			x = k.make(t, l1, dlock.WithTTL(s.h.longTTL()))
			other := k.make(t, l2, dlock.WithTTL(s.h.longTTL()))
			ran := false
			err := dlock.Do(ctx, x, func(fctx context.Context) error {
				ran = true
				if x.Token() == 0 || !x.Lease().Valid() || isClosed(x.Done()) || x.Err() != nil {
					return fmt.Errorf("in fn: Token %d, Lease %+v, Done closed %v, Err %v; want held",
						x.Token(), x.Lease(), isClosed(x.Done()), x.Err())
				}
				// Read in this order: the watchdog may renew meanwhile,
				// moving the end forward, never back.
				first := x.Lease().Expires
				dl, ok := fctx.Deadline()
				last := x.Lease().Expires
				if !ok || dl.Before(first) || dl.After(last) {
					return fmt.Errorf("in fn: Deadline %v (set %v); want the lease's end, between %v and %v", dl, ok, first, last)
				}
				if err := fctx.Err(); err != nil {
					return fmt.Errorf("in fn: the context has ended: %v", err)
				}
				if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
					return fmt.Errorf("in fn: TryLock by another Locker: %v; want ErrNotAcquired", err)
				}
				return nil
			})
			if err != nil || !ran {
				t.Fatalf("Do: %v (fn ran %v); want nil", err, ran)
			}
			checkUnlocked(t, "after Do returned", x)
			checkTakeable(t, ctx, "after Do returned", other)

			// Do unlocks when fn panics, and the panic goes on.
			type boom struct{}
			recovered := func() (r any) {
				defer func() { r = recover() }()
				_ = dlock.Do(ctx, x, func(context.Context) error {
					checkHolds(t, "in fn", x)
					panic(boom{})
				})
				return nil
			}()
			if _, ok := recovered.(boom); !ok {
				t.Fatalf("Do with fn panicking: recovered %v; want fn's panic value", recovered)
			}
			checkUnlocked(t, "after fn panicked in Do", x)
			checkTakeable(t, ctx, "after fn panicked in Do", other)
			for _, f := range fillers {
				if err := f.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
		})
	}
}

// HoldShapeLoss: for each of Mutex, MultiMutex, Semaphore, Election and
// RWMutex (writer and reader), when the hold is broken from outside while fn runs under Do, fn's
// context ends with a cause matching ErrLockLost, equal to Err, and Do
// returns an error matching ErrLockLost; another Locker can then take it.
func (s *suite) holdShapeLoss(t *testing.T) {
	for _, k := range s.lockables() {
		t.Run(k.name, func(t *testing.T) {
			ctx := ctxFor(t, 2*time.Minute)
			l1, l2 := s.locker(t), s.locker(t)
			// A short lease, renewed: a backend that does not report the
			// break notices it at the next renewal. Twice the harness's
			// TTL where the backend allows, so that a loaded machine
			// does not see the lease run out while Lock is granted.
			ttl := 2 * s.h.ttl()
			if s.h.MaxTTL > 0 {
				ttl = min(ttl, s.h.MaxTTL)
			}
			x := k.make(t, l1, dlock.WithTTL(ttl))
			var cause error
			err := dlock.Do(ctx, x, func(fctx context.Context) error {
				if err := fctx.Err(); err != nil {
					return fmt.Errorf("the context has ended before the break: %v", err)
				}
				if err := k.breakHold(t, ctxFor(t, 10*time.Second), l2, x); err != nil {
					return err
				}
				select {
				case <-fctx.Done():
				case <-time.After(ttl + s.h.ExpiryGrace + slack):
					return errors.New("the context of Do not cancelled after the hold was broken")
				}
				cause = context.Cause(fctx)
				if got := x.Err(); got != cause {
					return fmt.Errorf("after the break, Err = %v differs from context.Cause %v", got, cause)
				}
				return nil
			})
			if cause == nil && err != nil {
				t.Fatalf("Do: %v", err)
			}
			if !errors.Is(cause, dlock.ErrLockLost) {
				t.Fatalf("context.Cause after the hold was broken: %v; want ErrLockLost", cause)
			}
			if !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("Do with the hold broken: %v; want ErrLockLost", err)
			}
			if x.Token() != 0 || x.Lease().Valid() || !isClosed(x.Done()) || !errors.Is(x.Err(), dlock.ErrLockLost) {
				t.Fatalf("after the loss: Token %d, Lease valid %v, Done closed %v, Err %v; want 0, invalid, closed, ErrLockLost",
					x.Token(), x.Lease().Valid(), isClosed(x.Done()), x.Err())
			}
			if err := x.Renew(ctx); err == nil {
				t.Fatal("Renew after the loss: nil; want an error")
			}
			// The resource comes back (the lost holder's other keys are
			// released, or run out).
			y := k.make(t, l2, dlock.WithTTL(s.h.longTTL()))
			if err := y.Lock(ctxFor(t, ttl+s.h.ExpiryGrace+slack)); err != nil {
				t.Fatalf("Lock by another Locker after the loss: %v", err)
			}
			if err := y.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}

// HoldShapeElection: Lock campaigns with the value given by WithOwner (by
// default the Locker's owner description, the Election's Value), and
// Leader reports it with the leader's Token.
func (s *suite) holdShapeElection(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	name := s.key(t, "e")
	ttl := s.h.longTTL()
	watcher := mustElection(t, l2, name)
	a := mustElection(t, l1, name, dlock.WithTTL(ttl), dlock.WithOwner("candidate a"))
	if err := a.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if a.Value() != "candidate a" {
		t.Fatalf("Value() = %q; want the WithOwner value %q", a.Value(), "candidate a")
	}
	wantLeader(t, ctx, watcher, "candidate a", a.Token())
	wantLeader(t, ctx, a, "candidate a", a.Token())
	b := mustElection(t, l2, name, dlock.WithTTL(ttl))
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while another candidate leads: %v; want ErrNotAcquired", err)
	}
	term := a.Token()
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after the leader unlocked: %v; want ErrNoLeader", err)
	}
	// Without WithOwner: the Locker's owner description.
	c := mustElection(t, s.locker(t, dlock.WithOwner("locker c")), name, dlock.WithTTL(ttl))
	if err := c.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if c.Value() != "locker c" || c.Token() <= term {
		t.Fatalf("candidate without WithOwner: Value %q, Token %d; want the Locker's %q, a term above %d", c.Value(), c.Token(), "locker c", term)
	}
	wantLeader(t, ctx, a, "locker c", c.Token())
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while another candidate leads: %v; want ErrNotAcquired", err)
	}
	termC := c.Token()
	if err := c.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// b, on a Locker with the default owner description, campaigns with it.
	if err := b.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if b.Value() == "" || b.Value() == "locker c" || b.Token() <= termC {
		t.Fatalf("default candidate: Value %q, Token %d; want the default description, a term above %d", b.Value(), b.Token(), termC)
	}
	wantLeader(t, ctx, a, b.Value(), b.Token())
	if err := b.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
