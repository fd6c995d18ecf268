package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// ErrNoLeader: Election.Leader found nobody leading the election.
var ErrNoLeader = errors.New("dlock: election has no leader")

// announcePrefix names the key a new leader locks and unlocks once to wake
// the election's observers (see Election).
const announcePrefix = "dlock-election-announce/"

// Leader is a leader of an election, as observers and Election.Leader see
// it: the value it campaigned with and its term.
type Leader struct {
	// Value is what the leader passed to Campaign.
	Value string
	// Term is the leader's fencing token: strictly greater for every new
	// leader of the election, on every backend. It is the token of the
	// Mutex the leader holds on the election's name.
	Term Token
}

// Election is leader election on one name, with fenced terms, over any
// backend. Make one per candidate (or observer) with NewElection.
//
// # How it works
//
// An Election is a Mutex on the key name, and nothing more on the server:
//
//   - Campaign is that Mutex's Lock, with WithOwner(value), so the leader's
//     value is the hold's metadata and its term is the hold's fencing token.
//     Candidates wait exactly as Lock waits on that backend (see the table
//     below), never by polling. Once it holds the key, Campaign locks and
//     unlocks a second key, "dlock-election-announce/"+name, once: its
//     release is the notification observers wait for, since an acquire
//     publishes nothing on most stores. Campaign returns when both are done.
//   - Resign is Unlock. Leadership's loss signal is the Mutex's: Done closes
//     before the lease can expire on the server when renewals fail, and at
//     once when the backend reports the loss; the next candidate can win
//     only once the server has let the lease go. Term, Lease and Err read
//     the monotonic clock as the Mutex's do.
//   - Leader is one Locker.Inspect of name: the holder's metadata is the
//     value, its token the term.
//   - Observe watches the announce key (driver.Watch) and inspects name
//     after each notification, so a reader always ends up with the latest
//     leader: values are coalesced, never queued, and a leader is delivered
//     only if its term is higher than the last one delivered.
//
// Because the election is a lock on name, "lockctl status NAME" shows the
// leader (the OWNER column is its value) and "lockctl break NAME" deposes it.
// Do not use name as a Mutex key of your own.
//
// # Cost per backend
//
// Campaign costs one Lock of name, plus one Lock and one Unlock of the
// announce key (uncontended: that backend's Lock+Unlock round trips);
// Resign one Unlock; Leader one Inspect; each observed change one Inspect,
// and each Observe one watch for its lifetime. Leadership is renewed by the
// watchdog about every TTL/3, one Renew each. The waits and watches used:
//
//	memory    in-process notification on release and expiry; no round trip
//	file      inotify on the key's state file; a few file operations each
//	redis     candidates: pub/sub on name's release channel (sharded pub/sub
//	          on Cluster; the primary Sentinel names) plus a timer at the
//	          leader's remaining lease; observers: a subscription to the
//	          announce key's release channel; Lock and Unlock one script each
//	redlock   the same on every master (candidates wait in its wake queues,
//	          observers on the release channel); an acquire is one round trip to every
//	          master, plus one to write the token back where the masters'
//	          counters disagree (phase 2); a release one
//	etcd      candidates queue on the server (create revision order), each
//	          watching its predecessor; observers: an etcd watch on the
//	          announce key's queue prefix; Lock and Unlock one Raft write each
//	          (on a lease from the Locker's pool)
//	zookeeper candidates queue as sequential znodes, each watching its
//	          predecessor; observers: a child watch on the announce key's
//	          znode; Lock creates a znode, syncs and lists the queue, Unlock
//	          deletes the znode
//	consul    blocking queries on name (candidates) and on the announce key
//	          (observers); Lock and Unlock one transaction each (on a session
//	          from the Locker's pool)
//	postgres  candidates: LISTEN/NOTIFY on release plus a timer at the
//	          leader's remaining lease; observers: the announce key's
//	          NOTIFY; Lock and Unlock one statement each
//
// # Guarantees
//
// One leader at a time inside its validity window, as for a Mutex: act as
// leader only while Lease().Valid(), and hand Term() to whatever the leader
// writes to, so that a resource (package fence) refuses a deposed leader
// that was paused past its lease. The conformance suite checks, on every
// backend: one leader at a time across Lockers, that a second Campaign does
// not return while the first candidate leads, observers seeing every leader
// in order with strictly increasing terms (and a slow one the latest),
// replacement of a resigned and of a crashed leader, and a paused leader's
// term refused by a fence.
type Election struct {
	l    *locker
	name string
	ann  string
	opts []Option

	mu          sync.Mutex
	m           Mutex // the last Campaign's Mutex; nil before the first
	value       string
	campaigning bool
}

// portable finds dlock's own Locker in l, unwrapping Lockers that wrap
// one (see NewElection).
func portable(l Locker) (*locker, bool) {
	for range 16 {
		switch v := l.(type) {
		case *locker:
			return v, v != nil
		case interface{ Unwrap() Locker }:
			l = v.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}

// NewElection returns an Election on name over l. The options are those of
// the Mutex underneath (WithTTL, WithAutoRenew, WithObserver, ...); WithOwner
// is replaced by each Campaign's value. An empty or over-long name is an
// ErrInvalidKey error, a bad option an ErrInvalidOption one. A Locker that
// is not one of dlock's (NewLocker, Open, a backend's New) cannot watch keys
// and gets an error matching errors.ErrUnsupported, unless it wraps one and
// says so with a method Unwrap() Locker (a wrapper that embeds a Locker to
// close the backend's client with it, say).
func NewElection(l Locker, name string, opts ...Option) (*Election, error) {
	pl, ok := portable(l)
	if !ok {
		return nil, fmt.Errorf("dlock: election %q: the Locker %T is not one of dlock's (NewLocker, Open), so it cannot watch keys: %w", name, l, errors.ErrUnsupported)
	}
	if err := checkKey(name); err != nil {
		return nil, fmt.Errorf("dlock: election %q: %w", name, err)
	}
	if len(announcePrefix)+len(name) > driver.MaxKeyLen {
		return nil, fmt.Errorf("dlock: election: %w: name of %d bytes exceeds %d", ErrInvalidKey, len(name), driver.MaxKeyLen-len(announcePrefix))
	}
	if _, ok := pl.drv.(driver.Inspector); !ok {
		return nil, fmt.Errorf("dlock: election %q: backend %s cannot inspect keys: %w", name, pl.defaults.backend, errors.ErrUnsupported)
	}
	// Validate the options now, as NewMutex would at each Campaign.
	if _, err := pl.NewMutex(name, opts...); err != nil {
		return nil, fmt.Errorf("dlock: election %q: %w", name, err)
	}
	return &Election{l: pl, name: name, ann: announcePrefix + name, opts: opts}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

func (e *Election) errorf(op string, err error) error {
	return fmt.Errorf("dlock: %s %q: %w", op, e.name, err)
}

// Campaign blocks until this candidate leads the election with value, or
// ctx ends, or the Locker is closed (ErrClosed). It waits on the backend's
// notifications, never by polling. value is stored as the hold's owner
// description (at most driver.MaxMetaLen bytes of valid UTF-8, not empty;
// else ErrInvalidOption). When ctx ends first the error matches ctx's error
// and, as for Lock, ErrNotAcquired or ErrUnavailable, and nothing is left
// behind. Campaign on an Election that leads, or while another Campaign
// of the same Election runs, returns ErrAlreadyHeld.
//
// Once Campaign returns nil, Term is the new leader's fencing token, Done
// closes when leadership ends, and observers have been notified.
func (e *Election) Campaign(ctx context.Context, value string) error {
	if value == "" {
		return e.errorf("campaign", fmt.Errorf("%w: empty value", ErrInvalidOption))
	}
	if err := validOwner(value); err != nil {
		return e.errorf("campaign", err)
	}
	e.mu.Lock()
	switch {
	case e.campaigning:
		e.mu.Unlock()
		return e.errorf("campaign", fmt.Errorf("%w: a Campaign of this Election is in progress", ErrAlreadyHeld))
	case e.m != nil && e.m.Token() != 0:
		e.mu.Unlock()
		return e.errorf("campaign", fmt.Errorf("%w: this Election already leads", ErrAlreadyHeld))
	}
	e.campaigning = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()

	m, err := e.l.NewMutex(e.name, append(e.opts[:len(e.opts):len(e.opts)], WithOwner(value))...)
	if err != nil {
		return e.errorf("campaign", err)
	}
	if err := m.Lock(ctx); err != nil {
		return e.errorf("campaign", err)
	}
	if err := e.announce(ctx, m); err != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
		defer cancel()
		_ = m.Unlock(uctx)
		return e.errorf("campaign", fmt.Errorf("leading, but could not notify the observers, so resigned: %w", err))
	}
	e.mu.Lock()
	e.m, e.value = m, value
	e.mu.Unlock()
	return nil
}

// announce locks and unlocks the announce key once: its release wakes every
// observer's watch. It gives up when leadership ends or after two TTLs (a
// crashed announcer's lease runs out within one).
func (e *Election) announce(ctx context.Context, leader Mutex) error {
	a, err := e.l.NewMutex(e.ann, e.opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*leader.Lease().TTL)
	defer cancel()
	stop := context.AfterFunc(doneContext(leader.Done()), cancel)
	defer stop()
	if err := a.Lock(ctx); err != nil {
		if isClosed(leader.Done()) {
			return fmt.Errorf("leadership ended while announcing it: %w", leader.Err())
		}
		return err
	}
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
	defer ucancel()
	return a.Unlock(uctx)
}

// Resign ends this candidate's leadership (an Unlock): the next candidate
// can win at once. It returns ErrNotHeld when this Election does not lead,
// and an error matching ErrLockLost when leadership had been lost.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	m := e.m
	e.mu.Unlock()
	if m == nil {
		return e.errorf("resign", ErrNotHeld)
	}
	if err := m.Unlock(ctx); err != nil {
		return e.errorf("resign", err)
	}
	return nil
}

func (e *Election) current() Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m
}

// Term returns this candidate's term while it leads (its fencing token,
// strictly greater than every earlier leader's), 0 when it does not. Like
// Mutex.Token it reads the clock: a leadership whose validity window ran
// out reads 0.
func (e *Election) Term() Token {
	if m := e.current(); m != nil {
		return m.Token()
	}
	return 0
}

// Lease returns the lease of this candidate's leadership; the zero Lease
// when it does not lead. Act as leader only while Lease().Valid().
func (e *Election) Lease() Lease {
	if m := e.current(); m != nil {
		return m.Lease()
	}
	return Lease{}
}

// Done returns a channel closed when this candidate's leadership ends (by
// Resign, the Locker's Close, or loss, which is signalled before the lease
// can expire on the server and so before another candidate can win). It is
// already closed when the candidate does not lead. It is a notification;
// check Lease().Valid() before acting.
func (e *Election) Done() <-chan struct{} {
	if m := e.current(); m != nil {
		return m.Done()
	}
	return closedChan
}

// Err reports why the last leadership ended, as Mutex.Err: nil while
// leading or before the first Campaign; ErrUnlocked after Resign;
// ErrClosed; or an error matching ErrLockLost.
func (e *Election) Err() error {
	if m := e.current(); m != nil {
		return m.Err()
	}
	return nil
}

// Value returns the value of this candidate's last successful Campaign.
func (e *Election) Value() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.value
}

// Leader returns the current leader, from the server (one Inspect). With
// nobody leading it returns an error matching ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	info, err := e.l.Inspect(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	if !info.Held {
		return Leader{}, e.errorf("leader", ErrNoLeader)
	}
	return Leader{Value: info.Owner, Term: info.Token}, nil
}

// Observe delivers the election's leaders, in order of their terms, on the
// channel it returns. The watch is in place when Observe returns: the first
// value is the leader at that moment (if there is one), and no later leader
// is missed by a reader that keeps up. The channel holds one value: a slow
// reader misses intermediate leaders but always ends up with the latest,
// and never receives a term lower than or equal to one it received before.
// Only leaders are delivered, not vacancies (Leader says when there is
// none). On Redlock, a leader whose acquire is still writing its token
// back (phase 2) when an observer looks may first be delivered with a
// lower bound of its term, then, once it is announced, with its term. The channel is closed, and Observe's goroutine ends, when ctx ends
// or the Locker is closed.
//
// Observe costs one watch on the announce key for its lifetime and one
// Inspect per notification; on a transient error it retries with backoff
// (from TTL/20 up to the TTL).
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if err := ctx.Err(); err != nil {
		return nil, e.errorf("observe", err)
	}
	octx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.l.life, cancel)
	// Registered with the Locker, so Close waits for the goroutine to end
	// before it closes the driver.
	e.l.mu.Lock()
	if e.l.isClosed {
		e.l.mu.Unlock()
		stop()
		cancel()
		return nil, e.errorf("observe", ErrClosed)
	}
	e.l.wg.Add(1)
	e.l.mu.Unlock()
	w, err := e.l.drv.Watch(octx, e.ann)
	if err != nil {
		stop()
		cancel()
		e.l.wg.Done()
		if closedDuring(octx) || e.l.checkOpen() != nil {
			err = ErrClosed
		}
		return nil, e.errorf("observe", classify(octx, err, false))
	}
	out := make(chan Leader, 1)
	o := &observer{e: e, ctx: octx, w: w, out: out}
	go func() {
		defer e.l.wg.Done()
		defer cancel()
		defer stop()
		defer close(out)
		defer func() { _ = o.w.Close() }()
		o.run()
	}()
	return out, nil
}

// observer is one Observe's goroutine.
type observer struct {
	e    *Election
	ctx  context.Context
	w    driver.Watch
	out  chan Leader
	last Token
}

func (o *observer) run() {
	ttl := o.e.ttl()
	backoff := time.Duration(0)
	for {
		err := o.look()
		if err == nil {
			backoff = 0
			select {
			case _, ok := <-o.w.Changed():
				if !ok {
					err = o.rewatch()
				}
			case <-o.ctx.Done():
				return
			}
		}
		if err != nil {
			if o.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, ttl/20, time.Millisecond), ttl)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-o.ctx.Done():
				t.Stop()
				return
			}
		}
	}
}

// look inspects the election and delivers its leader if it is newer than
// the last one delivered.
func (o *observer) look() error {
	info, err := o.e.l.Inspect(o.ctx, o.e.name)
	if err != nil {
		return err
	}
	if !info.Held || info.Token <= o.last {
		return nil
	}
	o.last = info.Token
	v := Leader{Value: info.Owner, Term: info.Token}
	select {
	case o.out <- v:
	default:
		// Replace the value the reader has not taken: only this goroutine
		// sends, so the send below cannot block.
		select {
		case <-o.out:
		default:
		}
		o.out <- v
	}
	return nil
}

// rewatch replaces a broken watch; what changed meanwhile is caught by the
// next look.
func (o *observer) rewatch() error {
	_ = o.w.Close()
	w, err := o.e.l.drv.Watch(o.ctx, o.e.ann)
	if err != nil {
		o.w = closedWatch{}
		return err
	}
	o.w = w
	return nil
}

// ttl is the lease of the election's Mutexes.
func (e *Election) ttl() time.Duration {
	o := e.l.defaults
	for _, opt := range e.opts {
		opt(&o)
	}
	return o.ttl
}

// closedWatch stands in for a watch that could not be set up again: its
// closed channel makes the observer try again.
type closedWatch struct{}

func (closedWatch) Changed() <-chan struct{} { return closedChan }
func (closedWatch) Close() error             { return nil }

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// doneContext is a context that ends when done is closed.
func doneContext(done <-chan struct{}) context.Context { return chanContext(done) }

type chanContext <-chan struct{}

func (c chanContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c chanContext) Done() <-chan struct{}       { return c }
func (c chanContext) Err() error {
	if isClosed(c) {
		return context.Canceled
	}
	return nil
}
func (c chanContext) Value(any) any { return nil }
