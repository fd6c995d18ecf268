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
	// Value is what the leader campaigned with (Campaign's value, or the
	// Election's WithOwner for Lock).
	Value string
	// Token is the leader's term, its fencing token: strictly greater for
	// every new leader of the election, on every backend. It is the token
	// of the Mutex the leader holds on the election's name.
	Token Token
}

// Election is leader election on one name, with fenced terms, over any
// backend. Make one per candidate (or observer) with Locker.NewElection.
//
// An Election is a Mutex on the key name: Lock (or Campaign, with a value
// of its own) is that Mutex's Lock with the candidate's value as the owner
// description, so the leader's term is the hold's fencing token (Token),
// its loss signal is Done, and Unlock resigns. A leader's work runs for as
// long as the term lasts with Do:
//
//	err := dlock.Do(ctx, election, func(ctx context.Context) error {
//		// ctx ends when leadership is lost; write with election.Token().
//		return lead(ctx)
//	})
//
// Once it holds the key, a new leader announces itself on two companion
// keys ("dlock-election-leader/"+name and "dlock-election-announce/"+name),
// so that Observe delivers every leader, in order of their terms; Leader
// reads the current one. Do not use name as a Mutex key of your own;
// "lockctl status NAME" shows the leader and "lockctl break NAME" deposes
// it. docs/election.md has how it works, what Observe may miss, and the
// cost per backend.
//
// Guarantees: one leader at a time inside its validity window, as for a
// Mutex: act as leader only while Lease().Valid(), and hand Token() to
// whatever the leader writes to, so that a resource (package fence)
// refuses a deposed leader that was paused past its lease.
type Election struct {
	l    *Locker
	name string
	ann  string // watched by observers: its release wakes them
	rec  string // holds the last leader's announcement
	opts []Option
	own  string // the value Lock campaigns with

	mu          sync.Mutex
	m           *Mutex // the last Campaign's Mutex; nil before the first
	value       string
	campaigning bool
}

// NewElection returns an Election on name over l. The options are those
// of the Mutex underneath (WithTTL, WithAutoRenew, WithObserver, ...);
// WithOwner sets the value Lock campaigns with (by default the Locker's
// owner description), and Campaign's value replaces it. An empty or
// over-long name is an ErrInvalidKey error, a bad option an
// ErrInvalidOption one.
func (l *Locker) NewElection(name string, opts ...Option) (*Election, error) {
	if err := l.checkOpen(); err != nil {
		return nil, fmt.Errorf("dlock: election %q: %w", name, err)
	}
	if err := checkKey(name); err != nil {
		return nil, fmt.Errorf("dlock: election %q: %w", name, err)
	}
	if len(announcePrefix)+len(name) > driver.MaxKeyLen {
		return nil, fmt.Errorf("dlock: election: %w: name of %d bytes exceeds %d", ErrInvalidKey, len(name), driver.MaxKeyLen-len(announcePrefix))
	}
	if _, ok := l.drv.(driver.Inspector); !ok {
		return nil, fmt.Errorf("dlock: election %q: backend %s cannot inspect keys: %w", name, l.defaults.backend, errors.ErrUnsupported)
	}
	// Validate the options now, as NewMutex would at each Campaign.
	m, err := l.NewMutex(name, opts...)
	if err != nil {
		return nil, fmt.Errorf("dlock: election %q: %w", name, err)
	}
	return &Election{l: l, name: name, ann: announcePrefix + name, rec: leaderPrefix + name, opts: opts, own: m.opts.meta}, nil
}

// Key returns the election's name: the key its leader holds.
func (e *Election) Key() string { return e.name }

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
// Once Campaign returns nil, Token is the new leader's term, Done closes
// when leadership ends, and observers have been notified.
func (e *Election) Campaign(ctx context.Context, value string) error {
	return e.campaign(ctx, "campaign", value, (*Mutex).Lock)
}

// Lock campaigns, as Campaign does, with the Election's value (WithOwner
// given to NewElection, else the Locker's owner description).
func (e *Election) Lock(ctx context.Context) error {
	return e.campaign(ctx, "campaign", e.own, (*Mutex).Lock)
}

// TryLock makes one attempt to lead, with the Election's value: it returns
// an error matching ErrNotAcquired when another candidate leads.
func (e *Election) TryLock(ctx context.Context) error {
	return e.campaign(ctx, "try campaign", e.own, (*Mutex).TryLock)
}

func (e *Election) campaign(ctx context.Context, op, value string, take func(*Mutex, context.Context) error) error {
	if value == "" {
		return e.errorf(op, fmt.Errorf("%w: empty value", ErrInvalidOption))
	}
	if err := validOwner(value); err != nil {
		return e.errorf(op, err)
	}
	e.mu.Lock()
	switch {
	case e.campaigning:
		e.mu.Unlock()
		return e.errorf(op, fmt.Errorf("%w: a Campaign of this Election is in progress", ErrAlreadyHeld))
	case e.m != nil && e.m.Token() != 0:
		e.mu.Unlock()
		return e.errorf(op, fmt.Errorf("%w: this Election already leads", ErrAlreadyHeld))
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
		return e.errorf(op, err)
	}
	if err := take(m, ctx); err != nil {
		return e.errorf(op, err)
	}
	if err := e.announce(ctx, m, value); err != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
		defer cancel()
		_ = m.Unlock(uctx)
		return e.errorf(op, fmt.Errorf("leading, but could not notify the observers, so resigned: %w", err))
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
func (e *Election) announce(ctx context.Context, leader *Mutex, value string) error {
	a, err := e.l.NewMutex(e.ann, e.opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*leader.Lease().TTL)
	defer cancel()
	stop := context.AfterFunc(doneContext(leader.Done()), cancel)
	defer stop()
	ended := func(err error) error {
		if isDone(leader.Done()) {
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

// Unlock resigns: it ends this candidate's leadership, and the next
// candidate can win at once. It returns ErrNotHeld when this Election does
// not lead, and an error matching ErrLockLost when leadership had been
// lost. As Mutex.Unlock, it resigns even when ctx has ended.
func (e *Election) Unlock(ctx context.Context) error {
	e.mu.Lock()
	m := e.m
	e.mu.Unlock()
	if m == nil {
		return e.errorf("unlock", ErrNotHeld)
	}
	if err := m.Unlock(ctx); err != nil {
		return e.errorf("unlock", err)
	}
	return nil
}

func (e *Election) current() *Mutex {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.m
}

// Token returns this candidate's term while it leads (its fencing token,
// strictly greater than every earlier leader's), 0 when it does not. Like
// Mutex.Token it reads the clock: a leadership whose validity window ran
// out reads 0.
func (e *Election) Token() Token {
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
// Unlock, the Locker's Close, or loss, which is signalled before the lease
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
// leading or before the first Campaign; ErrUnlocked after Unlock;
// ErrClosed; or an error matching ErrLockLost.
func (e *Election) Err() error {
	if m := e.current(); m != nil {
		return m.Err()
	}
	return nil
}

// Renew extends the leadership's lease to a full TTL from now (the
// watchdog does it on its own). It returns ErrNotHeld when this Election
// does not lead and an error matching ErrLockLost when leadership was lost.
func (e *Election) Renew(ctx context.Context) error {
	m := e.current()
	if m == nil {
		return e.errorf("renew", ErrNotHeld)
	}
	if err := m.Renew(ctx); err != nil {
		return e.errorf("renew", err)
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
	return Leader{Value: info.Owner, Token: info.Token}, nil
}

// Observe delivers the election's leaders, in order of their terms, on the
// channel it returns. The watch is in place when Observe returns: the first
// value is the leader at that moment (if there is one), and every later
// leader is delivered to a reader that keeps up, even one that resigned
// right after its Campaign returned: each Campaign leaves an announcement
// of its term and value on the server for one TTL, replaced only by the
// next leader's, and observers read it after each wake.
//
// What may be missed (leaders that follow each other within about one
// round trip of the observer's wake, an announcement older than one TTL)
// is listed in docs/election.md. Whatever is missed, the terms delivered
// strictly increase; a reader that does not keep up receives at most the
// oldest leader not yet received and then the latest. Only leaders are
// delivered, not vacancies (Leader says when there is none). The channel
// is closed, and Observe's goroutine ends, when ctx ends or the Locker is
// closed.
func (e *Election) Observe(ctx context.Context) (<-chan Leader, error) {
	if err := ctx.Err(); err != nil {
		return nil, e.errorf("observe", err)
	}
	octx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.l.life, cancel)
	// Registered with the Locker, so Close waits for the goroutine to end
	// before it closes the driver.
	done, err := e.l.background()
	if err != nil {
		stop()
		cancel()
		return nil, e.errorf("observe", err)
	}
	fail := func(err error) (<-chan Leader, error) {
		stop()
		cancel()
		done()
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
		defer done()
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
			backoff = min(max(2*backoff, driver.RetryInterval(ttl), time.Millisecond), ttl)
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
		o.offer(Leader{Value: value, Token: term})
	}
	if info.Held {
		o.offer(Leader{Value: info.Owner, Token: info.Token})
	}
	return nil
}

// offer delivers v if its term is newer than every one offered before: at
// once if the channel has room, else as the pending leader (replacing an
// older pending one).
func (o *observer) offer(v Leader) {
	if v.Token <= o.last {
		return
	}
	o.last = v.Token
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

// doneContext is a context that ends when done is closed.
func doneContext(done <-chan struct{}) context.Context { return chanContext(done) }

type chanContext <-chan struct{}

func (c chanContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c chanContext) Done() <-chan struct{}       { return c }
func (c chanContext) Err() error {
	if isDone(c) {
		return context.Canceled
	}
	return nil
}
func (c chanContext) Value(any) any { return nil }
