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
// An Election is a Mutex on the key name, and on the server nothing more
// than that lock and, for one TTL after each Campaign, the announcement
// of its leader:
//
//   - Campaign is that Mutex's Lock, with WithOwner(value), so the leader's
//     value is the hold's metadata and its term is the hold's fencing token.
//     Candidates wait exactly as Lock waits on that backend (see the table
//     below), never by polling. Once it holds the key, Campaign announces
//     itself: it takes "dlock-election-leader/"+name with "TERM VALUE" as
//     the owner description (replacing, with Locker.Break, an older
//     leader's announcement), a hold nobody renews, given back after one
//     TTL; then it locks and unlocks a third key,
//     "dlock-election-announce/"+name, once: its release is the
//     notification observers wait for, since an acquire publishes nothing
//     on most stores. Campaign returns when all are done.
//   - Resign is Unlock. Leadership's loss signal is the Mutex's: Done closes
//     before the lease can expire on the server when renewals fail, and at
//     once when the backend reports the loss; the next candidate can win
//     only once the server has let the lease go. Term, Lease and Err read
//     the monotonic clock as the Mutex's do.
//   - Leader is one Locker.Inspect of name: the holder's metadata is the
//     value, its token the term.
//   - Observe watches the announce key (driver.Watch) and after each
//     notification inspects the announcement, then name, so that a leader
//     that has already resigned is still delivered, and a reader always
//     ends up with the latest leader: a leader is delivered only if its
//     term is higher than the last one delivered (see Observe for exactly
//     what may be missed).
//
// Because the election is a lock on name, "lockctl status NAME" shows the
// leader (the OWNER column is its value) and "lockctl break NAME" deposes it.
// Do not use name as a Mutex key of your own.
//
// # Cost per backend
//
// Campaign costs one Lock of name, one acquisition of the announcement key
// (after a leader of less than a TTL before, also one Inspect and one
// Break of it) and its release a TTL later, plus one Lock and one Unlock of
// the announce key (uncontended: that backend's Lock+Unlock round trips);
// Resign one Unlock; Leader one Inspect; each observed change two
// Inspects, and each Observe one Inspect and one watch for its lifetime.
// Leadership is renewed by the watchdog about every TTL/3, one Renew each.
// The waits and watches used:
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
// in order with strictly increasing terms, a leader that resigned at once
// included (and a slow one the latest), replacement of a resigned and of a
// crashed leader, and a paused leader's term refused by a fence.
type Election struct {
	l    *locker
	name string
	ann  string // watched by observers: its release wakes them
	rec  string // holds the last leader's announcement
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
	return &Election{l: pl, name: name, ann: announcePrefix + name, rec: leaderPrefix + name, opts: opts}, nil
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
	if err := e.announce(ctx, m, value); err != nil {
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

// announce writes the leader's announcement (publish), then locks and
// unlocks the announce key once: its release wakes every observer's watch.
// It gives up when leadership ends or after two TTLs (a crashed
// announcer's lease runs out within one).
func (e *Election) announce(ctx context.Context, leader Mutex, value string) error {
	a, err := e.l.NewMutex(e.ann, e.opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*leader.Lease().TTL)
	defer cancel()
	stop := context.AfterFunc(doneContext(leader.Done()), cancel)
	defer stop()
	ended := func(err error) error {
		if isClosed(leader.Done()) {
			return fmt.Errorf("leadership ended while announcing it: %w", leader.Err())
		}
		return err
	}
	term := leader.Token()
	if term == 0 {
		return ended(ErrLockLost)
	}
	// A leader whose announcement the store refuses is still seen on name
	// while it leads: Campaign goes on without it.
	if err := e.publish(ctx, term, value, e.ttl()); err != nil && !errors.Is(err, errNotAnnounced) {
		return ended(err)
	}
	if err := a.Lock(ctx); err != nil {
		return ended(err)
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
// value is the leader at that moment (if there is one), and every later
// leader is delivered to a reader that keeps up, even one that resigned
// right after its Campaign returned: each Campaign leaves an announcement
// of its term and value on the server for one TTL, replaced only by the
// next leader's, and observers read it after each wake.
//
// Exactly what may be missed: a leader whose announcement the next
// leader's replaced before the observer read it (leaders that follow each
// other within about one Inspect round trip of the observer's wake, or
// within the time it was retrying after errors); an announcement older
// than one TTL when the observer reads it; a leader whose announcement the
// store refused (a Consul lock-delay on the announcement key after the
// session of the previous leader's process ended) and a leader whose value
// is too long to be announced beside its term (more than
// driver.MaxMetaLen bytes with the term, its decimal digits and a space),
// each when it no longer leads when the observer looks. Leaders announced
// before Observe was called are not delivered, only the one leading then.
// Whatever is missed, the terms delivered strictly increase.
//
// A reader that does not keep up misses intermediate leaders: the channel
// holds the oldest leader not yet received, and the observer keeps only
// the latest one found after it, so a slow reader receives at most that
// one and then the latest, never a term lower than or equal to one it
// received before. Only leaders are delivered, not vacancies (Leader says
// when there is none). On Redlock, a leader whose acquire is still writing
// its token back (phase 2) when an observer looks may first be delivered
// with a lower bound of its term, then, once it is announced, with its
// term. The channel is closed, and Observe's goroutine ends, when ctx
// ends or the Locker is closed.
//
// Observe costs one Inspect of the announcement when it starts, one watch
// on the announce key for its lifetime and two Inspects per notification
// (the announcement and the leader); on a transient error it retries with
// backoff (from TTL/20 up to the TTL).
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
	fail := func(err error) (<-chan Leader, error) {
		stop()
		cancel()
		e.l.wg.Done()
		if closedDuring(octx) || e.l.checkOpen() != nil {
			err = ErrClosed
		}
		return nil, e.errorf("observe", classify(octx, err, false))
	}
	// The announcement already there is older than this Observe: it is
	// not delivered, unless its leader still leads.
	base, _, _, err := e.announced(octx)
	if err != nil {
		return fail(err)
	}
	w, err := e.l.drv.Watch(octx, e.ann)
	if err != nil {
		return fail(err)
	}
	out := make(chan Leader, 1)
	o := &observer{e: e, ctx: octx, w: w, out: out, base: base}
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

// announced reads the last leader's announcement: its term (0 when there
// is none) and its value, if it has one.
func (e *Election) announced(ctx context.Context) (term Token, value string, hasValue bool, err error) {
	info, err := e.l.Inspect(ctx, e.rec)
	if err != nil || !info.Held {
		return 0, "", false, err
	}
	term, value, hasValue, ok := parseAnnouncement(info.Owner)
	if !ok {
		return 0, "", false, nil
	}
	return term, value, hasValue, nil
}

// observer is one Observe's goroutine.
type observer struct {
	e    *Election
	ctx  context.Context
	w    driver.Watch
	out  chan Leader
	base Token // the announcement's term when Observe began
	last Token // the highest term sent or pending

	// The latest leader found while the reader had not taken the
	// previous one: sent as soon as the channel has room.
	pending    Leader
	hasPending bool
}

func (o *observer) run() {
	ttl := o.e.ttl()
	backoff := time.Duration(0)
	for {
		err := o.look()
		if err == nil {
			backoff = 0
			var woke, ok bool
			if woke, ok = wait(o, o.w.Changed()); !woke {
				return
			}
			if !ok {
				err = o.rewatch()
			}
		}
		if err != nil {
			if o.ctx.Err() != nil {
				return
			}
			backoff = min(max(2*backoff, ttl/20, time.Millisecond), ttl)
			t := time.NewTimer(backoff)
			woke, _ := wait(o, t.C)
			t.Stop()
			if !woke {
				return
			}
		}
	}
}

// wait hands the pending leader to the reader when the channel has room,
// until c delivers (woke true, ok false if c was closed) or ctx ends
// (woke false).
func wait[T any](o *observer, c <-chan T) (woke, ok bool) {
	for {
		var send chan Leader
		if o.hasPending {
			send = o.out
		}
		select {
		case send <- o.pending:
			o.hasPending = false
		case _, ok := <-c:
			return true, ok
		case <-o.ctx.Done():
			return false, false
		}
	}
}

// look reads the last announcement and the leader, and offers each that is
// newer than what was offered before, oldest first.
func (o *observer) look() error {
	term, value, hasValue, err := o.e.announced(o.ctx)
	if err != nil {
		return err
	}
	info, err := o.e.l.Inspect(o.ctx, o.e.name)
	if err != nil {
		return err
	}
	// An announcement without a value (too long to fit) is delivered
	// from the leader's hold below, if its leader still leads.
	if term > o.base && hasValue {
		o.offer(Leader{Value: value, Term: term})
	}
	if info.Held {
		o.offer(Leader{Value: info.Owner, Term: info.Token})
	}
	return nil
}

// offer delivers v if its term is newer than every one offered before: at
// once if the channel has room, else as the pending leader (replacing an
// older pending one).
func (o *observer) offer(v Leader) {
	if v.Term <= o.last {
		return
	}
	o.last = v.Term
	if !o.hasPending {
		select {
		case o.out <- v:
			return
		default:
		}
	}
	o.pending, o.hasPending = v, true
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
