package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sharedlease"
)

// maxIdle bounds the idle leases a Locker keeps per TTL. Leases beyond it
// carry no keys and are left to expire on the server.
const maxIdle = 16

// lease is one etcd lease. It backs at most one queue entry at a time: a
// hold, a waiter, or nothing while it sits in the pool.
type lease struct {
	id   clientv3.LeaseID
	want int64 // the TTL asked for, in seconds: the pool bucket
	// home is the raft term the lease was granted in (see retired).
	home   uint64
	shared bool // backs many entries at once (see leasePool)
	refs   int  // shared: entries on it; guarded by leasePool.mu

	// turn lets one renewal at a time (a keepalive and the read that
	// confirms it, see keepAliveConfirmed) work on the lease. Without it a
	// caller's Renew and the watchdog's could interleave: one goroutine's
	// read, asked for before the other's keepalive was answered, would
	// confirm that keepalive, which may have come from a deposed leader.
	turn chan struct{}

	mu    sync.Mutex
	ttl   time.Duration // as granted by the server
	since time.Time     // send time of the grant or the last confirmed keepalive
	pend  extension     // the last keepalive, not confirmed yet
	// retired is set once a response that went through consensus shows a
	// raft term other than home: the lease is never extended again.
	//
	// A leader that was paused (a stop signal, a long stall) and wakes
	// up still holds every lease in its memory with the expiry it last
	// gave it, and before it learns of the new leader it finds them
	// expired and asks for their revocation. Its requests reach the new
	// leader and are committed, also for leases that the new leader kept
	// alive meanwhile: their entries vanish while their holders' validity
	// windows still run. The fault suite saw this break exclusion on etcd
	// 3.4.23 and 3.6.16 alike (3.6's guard, ensureLeadership, is skipped
	// while the member's raft loop ticks, as it does at once on waking).
	// A keepalive answered in the lease's home term was answered by the
	// leader that granted it, whose own expiry is then never earlier than
	// the client's; a leader of a later term set its expiry a TTL and an
	// election timeout after it took over. So only keepalives of the home
	// term extend a lease. After a leader change the entries on it move
	// onto a lease of the new term, which no earlier leader knows (see
	// rehome).
	retired bool
	// shared: the holds on it, each with the instant its own validity
	// would have ended on a lease of its own (see sweep).
	holds sharedlease.Holds[*hold]
	// shared: the last keepalive round, in flight or over (see refresh).
	round *keepRound
}

// keepRound is one keepalive of a shared lease and the linearizable read
// that confirmed it (see extension), shared by every caller that asked for
// a keepalive sent no earlier than start.
type keepRound struct {
	start time.Time     // taken before the keepalive was sent
	done  chan struct{} // closed once rev and err are set
	rev   int64         // the confirming read's revision
	err   error
}

func (r *keepRound) over() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// track records that h is on the shared lease l, valid until until.
func (l *lease) track(h *hold, until time.Time) {
	l.mu.Lock()
	if l.holds == nil {
		l.holds = sharedlease.Holds[*hold]{}
	}
	l.holds.Track(h, until)
	l.mu.Unlock()
}

// validity returns the instant h's own validity ends on the shared lease
// l, and whether l still tracks h.
func (l *lease) validity(h *hold) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holds.Validity(h)
}

// untrack forgets h (released or lost).
func (l *lease) untrack(h *hold) {
	l.mu.Lock()
	l.holds.Untrack(h)
	l.mu.Unlock()
}

// expired returns the holds on the shared lease l whose own validity has
// ended at now, and forgets them (see sharedlease.Holds.Expired).
func (l *lease) expired(now time.Time) []*hold {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holds.Expired(now)
}

// extension is a keepalive answered in raft term term.
//
// Any member that believes it leads answers keepalives. A leader that was
// paused or cut off, and has not yet learned that another was elected,
// still does: it renews the lease in its own memory while the real leader
// lets it run out (etcd before 3.4.25 and 3.5.8, etcd issue 15247). The
// fault suite saw this break exclusion with a paused leader. So a keepalive
// only extends the lease once a response that went through consensus (a
// transaction or a linearizable read), asked for after the keepalive was
// answered, shows the same term: one term has one leader, and it still led
// after renewing. A keepalive answered in an older term is dropped.
type extension struct {
	sent time.Time
	ttl  time.Duration
	term uint64
}

// state returns when the lease's current term began and how long it runs.
func (l *lease) state() (since time.Time, ttl time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.since, l.ttl
}

// isRetired reports whether l can no longer be extended (see retired).
func (l *lease) isRetired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.retired
}

// extended records a keepalive sent at sent and answered in raft term
// term; it counts once confirm sees that term. An answer of a later term
// than the lease's grant retires the lease at once: the leader changed.
func (l *lease) extended(sent time.Time, ttlSeconds int64, term uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term > l.home {
		l.retired = true
	}
	if sent.After(l.pend.sent) {
		l.pend = extension{sent: sent, ttl: time.Duration(ttlSeconds) * time.Second, term: term}
	}
}

// lastSent is the send time of the last keepalive, confirmed or not: when
// the next one is due.
func (l *lease) lastSent() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pend.sent.After(l.since) {
		return l.pend.sent
	}
	return l.since
}

// confirm is given the raft term of a response that went through consensus
// and was asked for after the last keepalive was answered. It applies that
// keepalive if its term is the same and is the lease's home term, and
// drops it otherwise. It returns nil when no keepalive was dropped,
// errDeposed when the keepalive was answered in another term than the
// response, and errRetired when the response shows that the leader changed
// since the lease was granted (see retired).
func (l *lease) confirm(term uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if term != l.home {
		l.retired = true
	}
	p := l.pend
	l.pend = extension{}
	switch {
	case p.term == 0:
	case p.term != term:
		return errDeposed
	case !l.retired:
		if p.sent.After(l.since) {
			l.since = p.sent
		}
		l.ttl = p.ttl
	}
	if l.retired {
		return errRetired
	}
	return nil
}

// leasePool hands out leases for new queue entries.
//
// Shared (the default): one lease per TTL backs every entry of the Locker
// with that TTL, so many holds cost one keepalive per renewal interval
// (RenewBatch), under the policy of package sharedlease (reuse, refresh
// or replace, one grant at a time, sweep). A shared lease that ends
// deletes every entry on it; each of their holds is lost on its own (the
// loss watch sees each deletion).
//
// Per hold (Config.LeasePerHold): a lease backs one entry at a time and is
// reused by later entries once released.
//
// Either way a lease keeps its clock: the hold it backs reports the send
// time of the grant or keepalive that last extended it, so its validity
// window is exact, only shorter than a fresh one.
type leasePool struct {
	cli    *clientv3.Client
	shared bool
	// term is the highest raft term a response has shown (see grant).
	term atomic.Uint64
	// sweep runs before every keepalive of a shared lease (drv.sweep).
	sweep func(*lease)

	sharedPool *sharedlease.Pool[int64, *lease]

	mu       sync.Mutex
	idle     map[int64][]*lease
	sharedBy map[int64]*lease // the current shared lease of each TTL
}

func newLeasePool(cli *clientv3.Client, shared bool) *leasePool {
	p := &leasePool{cli: cli, shared: shared, idle: map[int64][]*lease{}, sharedBy: map[int64]*lease{}}
	p.sharedPool = sharedlease.New[int64, *lease](sharedStore{p})
	return p
}

// getShared returns the shared lease of ttl, counting one more entry on
// it.
func (p *leasePool) getShared(ctx context.Context, ttl time.Duration) (*lease, error) {
	return p.sharedPool.Get(ctx, seconds(ttl))
}

// sharedStore is the leasePool's shared leases as sharedlease sees them,
// bucketed by TTL in seconds.
type sharedStore struct{ p *leasePool }

func (s sharedStore) Current(want int64) (*lease, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return s.p.sharedBy[want], nil
}

func (s sharedStore) Clock(l *lease) (time.Time, time.Duration) { return l.state() }

func (s sharedStore) Use(l *lease) bool {
	s.p.mu.Lock()
	l.refs++
	s.p.mu.Unlock()
	return true
}

// Refresh keeps l alive with a confirmed keepalive; the keepalive sweeps
// l first (see keepAlive).
func (s sharedStore) Refresh(ctx context.Context, l *lease) error {
	_, err := s.p.refresh(ctx, l, time.Now())
	return err
}

// Replace grants a new shared lease of want seconds. The one it replaces
// goes on serving its entries: they are renewed through it.
func (s sharedStore) Replace(ctx context.Context, want int64, _ *lease) (*lease, error) {
	nl, err := s.p.grant(ctx, want)
	if err != nil {
		return nil, err
	}
	nl.shared, nl.refs = true, 1
	s.p.mu.Lock()
	s.p.sharedBy[want] = nl
	s.p.mu.Unlock()
	return nl, nil
}

// refresh keeps the shared lease l alive with a keepalive sent no earlier
// than after, confirmed by a linearizable read, and returns that read's
// revision. Callers share rounds: one that finds a round started at or
// after its own after waits for it and takes its outcome; one that finds
// an older round still in flight waits for it to end, then starts the
// next one or joins whoever did. However many renewal batches fall due
// together, and however many new entries ask for a fresh lease meanwhile,
// they cost two keepalives at most, instead of one each, queued one
// behind the other on the lease's renewal turn: at 100,000 holds that
// queue outlasted the lease.
func (p *leasePool) refresh(ctx context.Context, l *lease, after time.Time) (int64, error) {
	for {
		l.mu.Lock()
		r := l.round
		if r == nil || r.over() && (r.err != nil || r.start.Before(after)) {
			r = &keepRound{start: time.Now(), done: make(chan struct{})}
			l.round = r
			l.mu.Unlock()
			r.rev, r.err = p.keepAliveConfirmed(ctx, l)
			close(r.done)
			return r.rev, r.err
		}
		l.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if r.start.Before(after) {
			continue // sent too early for this caller: the next round
		}
		if r.err == nil {
			return r.rev, nil
		}
		if !errors.Is(r.err, context.Canceled) && !errors.Is(r.err, context.DeadlineExceeded) {
			return 0, r.err
		}
		// The round ended with its own caller's context: go again.
	}
}

// keepAliveConfirmed keeps the shared lease l alive once and confirms the
// keepalive with a linearizable read, in the lease's renewal turn (see
// extension). It returns the read's revision.
func (p *leasePool) keepAliveConfirmed(ctx context.Context, l *lease) (int64, error) {
	if err := l.take(ctx); err != nil {
		return 0, err
	}
	defer l.give()
	if err := p.keepAlive(ctx, l); err != nil {
		if leaseGone(err) || errors.Is(err, errRetired) {
			p.dead(l)
		}
		return 0, err
	}
	resp, err := p.cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	if err := p.confirm(l, resp.Header.RaftTerm); err != nil {
		return 0, driver.Unavailable(err)
	}
	return resp.Header.Revision, nil
}

// confirm confirms l's last keepalive with the raft term of a consensus
// response (see lease.confirm). A shared lease found retired is forgotten,
// so that new entries go on a lease of the current term.
func (p *leasePool) confirm(l *lease, term uint64) error {
	p.saw(term)
	err := l.confirm(term)
	if errors.Is(err, errRetired) {
		p.dead(l)
	}
	return err
}

// saw records the raft term of a consensus response.
func (p *leasePool) saw(term uint64) {
	for {
		t := p.term.Load()
		if term <= t || p.term.CompareAndSwap(t, term) {
			return
		}
	}
}

// errBehind is returned when a member that has not caught up with the
// lease's grant says the lease does not exist.
var errBehind = errors.New("etcd: lease not found by a member behind its grant")

// errRetired is returned when a lease cannot be extended because the
// cluster changed leader since it was granted (see lease.retired).
var errRetired = errors.New("etcd: the lease was granted under an earlier leader and is no longer extended")

// errDeposed is returned when a keepalive was answered in an older raft
// term than the read that followed it: possibly by a leader that had
// already been replaced, which extends nothing (see extension).
var errDeposed = errors.New("etcd: keepalive answered by a leader that may have been deposed")

// dead forgets a shared lease found gone on the server, so that no new
// entry is put on it.
func (p *leasePool) dead(l *lease) {
	if !l.shared {
		return
	}
	p.mu.Lock()
	if p.sharedBy[l.want] == l {
		delete(p.sharedBy, l.want)
	}
	p.mu.Unlock()
}

// grantTries bounds the grants of one call to grant whose raft term is
// not known for sure.
const grantTries = 3

// grant asks the cluster for a new lease of want seconds, and learns the
// raft term it was granted in (lease.home). A grant's response shows the
// term of the member that answered, which may be later than the term of
// the leader that granted it; the term is certain when the response shows
// the highest term seen before the grant was sent, since the granting
// leader's term lies between the two. Otherwise the lease is left to
// expire and another granted. With no term seen yet, a read learns it
// first.
func (p *leasePool) grant(ctx context.Context, want int64) (*lease, error) {
	if p.term.Load() == 0 {
		err := retry(ctx, func(ctx context.Context) error {
			resp, err := p.cli.Get(ctx, "\x00", clientv3.WithCountOnly())
			if err == nil {
				p.saw(resp.Header.RaftTerm)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	for try := 1; ; try++ {
		var (
			r      *clientv3.LeaseGrantResponse
			sent   time.Time
			before uint64
		)
		// A grant is safe to send again: one applied unanswered is a
		// lease with no key, which expires.
		err := retry(ctx, func(ctx context.Context) (err error) {
			before, sent = p.term.Load(), time.Now()
			r, err = p.cli.Grant(ctx, want)
			return err
		})
		if err != nil {
			return nil, err
		}
		term := r.RaftTerm
		p.saw(term)
		if term == before {
			return newLease(r.ID, want, time.Duration(r.TTL)*time.Second, sent, term), nil
		}
		// Granted around a leader change: by which leader is not known.
		// The lease carries no key; it expires by itself.
		if try == grantTries {
			return nil, driver.Unavailable(fmt.Errorf("etcd: leader changed during each of %d lease grants", grantTries))
		}
	}
}

// seconds rounds a TTL up to whole seconds, as etcd leases are.
func seconds(ttl time.Duration) int64 {
	return int64((ttl + time.Second - 1) / time.Second)
}

// get returns a lease of ttl (rounded up to whole seconds). An idle lease
// whose renewal is not due yet (less than a third of its TTL used) is used
// as is; an older one that still runs is kept alive first, which costs a
// round trip but no consensus write (and keeps entry names few, see
// entry); one about to expire is dropped and a new lease is granted.
func (p *leasePool) get(ctx context.Context, ttl time.Duration) (*lease, error) {
	if p.shared {
		return p.getShared(ctx, ttl)
	}
	want := seconds(ttl)
	for {
		l := p.pop(want)
		if l == nil {
			break
		}
		if l.isRetired() {
			continue
		}
		since, lt := l.state()
		now := time.Now()
		if sharedlease.Fresh(since, lt, now) {
			return l, nil
		}
		if sharedlease.Renewable(since, lt, now) {
			if err := p.keepAlive(ctx, l); err == nil {
				return l, nil
			} else if ctx.Err() != nil {
				return nil, err
			}
		}
	}
	return p.grant(ctx, want)
}

func newLease(id clientv3.LeaseID, want int64, ttl time.Duration, since time.Time, home uint64) *lease {
	return &lease{id: id, want: want, home: home, ttl: ttl, since: since, turn: make(chan struct{}, 1)}
}

// take waits for the lease's renewal turn (see lease.turn), or for ctx to
// end; give hands the turn back.
func (l *lease) take(ctx context.Context) error {
	select {
	case l.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *lease) give() { <-l.turn }

func (p *leasePool) pop(want int64) *lease {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.idle[want]
	if len(s) == 0 {
		return nil
	}
	l := s[len(s)-1]
	s[len(s)-1] = nil
	p.idle[want] = s[:len(s)-1]
	return l
}

// use counts n more entries on the shared lease l (see getShared).
func (p *leasePool) use(l *lease, n int) {
	if !l.shared || n <= 0 {
		return
	}
	p.mu.Lock()
	l.refs += n
	p.mu.Unlock()
}

// put returns a lease that no longer carries any key to the pool; for a
// shared lease, it counts one entry fewer on it.
func (p *leasePool) put(l *lease) {
	if l.shared {
		p.mu.Lock()
		l.refs--
		p.mu.Unlock()
		return
	}
	if since, lt := l.state(); l.isRetired() || !sharedlease.Renewable(since, lt, time.Now()) {
		return // about to expire, or never extended again: not worth keeping
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle[l.want]) < maxIdle {
		p.idle[l.want] = append(p.idle[l.want], l)
	}
}

// keepAlive extends l once, recording the send time; the extension counts
// once confirmed (see extension).
func (p *leasePool) keepAlive(ctx context.Context, l *lease) error {
	if l.shared && p.sweep != nil {
		p.sweep(l)
	}
	if l.isRetired() {
		return driver.Unavailable(errRetired)
	}
	sent := time.Now()
	r, err := p.cli.KeepAliveOnce(ctx, l.id)
	if err != nil {
		if leaseGone(err) && r != nil && r.ResponseHeader != nil && r.RaftTerm < l.home {
			// A member still in an earlier term, a leader just woken
			// from a pause say, has not applied the grant yet.
			return driver.Unavailable(fmt.Errorf("%w (member %x in raft term %d, the lease's is %d)", errBehind, r.MemberId, r.RaftTerm, l.home))
		}
		return err
	}
	p.saw(r.RaftTerm)
	l.extended(sent, r.TTL, r.RaftTerm)
	return nil
}

// revoke ends l on the server, deleting any key attached to it.
func (p *leasePool) revoke(ctx context.Context, l *lease) error {
	err := onLeader(ctx, func(ctx context.Context) error {
		_, err := p.cli.Revoke(ctx, l.id)
		return err
	})
	if leaseGone(err) {
		return nil
	}
	return err
}

// drain revokes every idle lease, and the shared ones (Close: every hold
// has been released).
func (p *leasePool) drain(ctx context.Context) {
	p.mu.Lock()
	var all []*lease
	for _, s := range p.idle {
		all = append(all, s...)
	}
	for _, l := range p.sharedBy {
		all = append(all, l)
	}
	p.idle = map[int64][]*lease{}
	p.sharedBy = map[int64]*lease{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.revoke(ctx, l)
		}()
	}
	wg.Wait()
}
