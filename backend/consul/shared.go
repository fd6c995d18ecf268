package consul

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/sharedlease"
)

// sharedSessions hands out the Locker's shared sessions: one per requested
// TTL backs every hold of the Locker with that TTL, so that many holds cost
// one session renewal per renewal round instead of one each (RenewBatch),
// under the policy of package sharedlease (reuse, renew or replace, one
// grant at a time, sweep).
//
// A shared session that ends (its TTL ran out, or it was destroyed from
// outside) deletes every key it holds (behavior=delete), so every hold on
// it is lost, each with its own Done. A replaced session goes on serving
// its holds until the last one ends, and is then destroyed. The holds
// swept before a renewal have their keys deleted and are marked lost.
type sharedSessions struct {
	d    *consulDriver
	pool *sharedlease.Pool[time.Duration, *session]

	mu     sync.Mutex
	closed bool
	byTTL  map[time.Duration]*session // the current shared session of each TTL
	all    map[*session]struct{}      // every shared session not yet destroyed
}

func newSharedSessions(d *consulDriver) *sharedSessions {
	ss := &sharedSessions{
		d:     d,
		byTTL: map[time.Duration]*session{},
		all:   map[*session]struct{}{},
	}
	ss.pool = sharedlease.New[time.Duration, *session](sharedStore{ss})
	return ss
}

// get returns the shared session of ttl, counting one more user of it;
// the caller gives it back with put unless a hold on it is tracked.
func (ss *sharedSessions) get(ctx context.Context, ttl time.Duration) (*session, error) {
	return ss.pool.Get(ctx, ttl)
}

// current returns the current shared session of ttl (nil if none).
func (ss *sharedSessions) current(ttl time.Duration) (*session, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return nil, driver.ErrClosed
	}
	return ss.byTTL[ttl], nil
}

// sharedStore is the shared sessions as sharedlease sees them, bucketed by
// requested TTL.
type sharedStore struct{ ss *sharedSessions }

func (st sharedStore) Current(ttl time.Duration) (*session, error) { return st.ss.current(ttl) }

func (st sharedStore) Clock(s *session) (time.Time, time.Duration) { return s.state() }

func (st sharedStore) Use(s *session) bool { return s.use() }

// Refresh sweeps and renews s. A session found gone is marked dead (see
// gone), so Use refuses it and a new one replaces it.
func (st sharedStore) Refresh(ctx context.Context, s *session) error {
	_, _, err := st.ss.d.renewShared(ctx, s)
	return err
}

// Replace creates a new shared session of ttl and makes it current; old,
// if any, is destroyed once unused.
func (st sharedStore) Replace(ctx context.Context, ttl time.Duration, _ *session) (*session, error) {
	ss := st.ss
	ns, err := ss.d.createSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	ns.shared, ns.refs, ns.holds = true, 1, map[*hold]time.Time{}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		ss.d.destroyLater(ns)
		return nil, driver.ErrClosed
	}
	old := ss.byTTL[ttl]
	ss.byTTL[ttl] = ns
	ss.all[ns] = struct{}{}
	ss.mu.Unlock()
	if old != nil {
		ss.retireIfUnused(old)
	}
	return ns, nil
}

// use counts one more user of s, unless s is gone.
func (s *session) use() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead {
		return false
	}
	s.refs++
	return true
}

// put gives back a use of s that did not become a hold (a failed acquire).
func (ss *sharedSessions) put(s *session) {
	s.mu.Lock()
	s.refs--
	s.mu.Unlock()
	ss.retireIfUnused(s)
}

// track records that h, on s, is valid until until.
func (s *session) track(h *hold, until time.Time) {
	s.mu.Lock()
	sharedlease.Holds[*hold](s.holds).Track(h, until)
	s.mu.Unlock()
}

// extend moves h's validity end to until, and reports false if h is no
// longer on s (swept, or its session found gone).
func (s *session) extend(h *hold, until time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sharedlease.Holds[*hold](s.holds).Extend(h, until)
}

// untrack ends h's use of s (released, or lost and released). It reports
// false if h was no longer on s.
func (ss *sharedSessions) untrack(h *hold) bool {
	s := h.s
	s.mu.Lock()
	ok := sharedlease.Holds[*hold](s.holds).Untrack(h)
	if ok {
		s.refs--
	}
	s.mu.Unlock()
	if ok {
		ss.retireIfUnused(s)
	}
	return ok
}

// retireIfUnused destroys s once it is neither current nor used.
func (ss *sharedSessions) retireIfUnused(s *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.byTTL[s.want] == s {
		return
	}
	s.mu.Lock()
	unused := s.refs == 0
	s.mu.Unlock()
	if _, live := ss.all[s]; live && unused {
		delete(ss.all, s)
		ss.d.destroyLater(s)
	}
}

// gone forgets s, found gone on the server, and marks every hold on it
// lost: the server deleted their keys when it ended the session.
func (ss *sharedSessions) gone(s *session) {
	ss.mu.Lock()
	if ss.byTTL[s.want] == s {
		delete(ss.byTTL, s.want)
	}
	delete(ss.all, s)
	ss.mu.Unlock()
	s.mu.Lock()
	s.dead = true
	lost := make([]*hold, 0, len(s.holds))
	for h := range s.holds {
		lost = append(lost, h)
	}
	s.refs -= len(s.holds)
	clear(s.holds)
	s.mu.Unlock()
	for _, h := range lost {
		h.lost.Mark()
	}
}

// expired returns the holds on s whose own validity has ended at now, and
// forgets them (see sharedlease.Holds.Expired).
func (s *session) expired(now time.Time) []*hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := sharedlease.Holds[*hold](s.holds).Expired(now)
	s.refs -= len(out)
	return out
}

// close destroys every shared session (Close: every hold has ended).
func (ss *sharedSessions) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for s := range ss.all {
		ss.d.destroyLater(s)
	}
	clear(ss.all)
	clear(ss.byTTL)
}

// renewShared sweeps the shared session s (see sharedSessions) and renews
// it once. It returns the send time of the renewal and whether s still
// exists; when it does not, every hold on it is marked lost.
func (d *consulDriver) renewShared(ctx context.Context, s *session) (time.Time, bool, error) {
	if swept := s.expired(time.Now()); len(swept) > 0 {
		for _, h := range swept {
			h.stopMonitor()
			h.lost.Mark()
			d.dropLater(h)
		}
		d.shared.retireIfUnused(s)
	}
	sent := time.Now()
	_, ok, err := d.renewSession(ctx, s)
	if err != nil {
		return sent, false, err
	}
	if !ok {
		d.shared.gone(s)
	}
	return sent, ok, nil
}

// dropLater deletes h's key in the background if it is still h's (locked
// by h's session at h's index). It never ends the session.
func (d *consulDriver) dropLater(h *hold) {
	d.background(func(ctx context.Context) {
		_, _, _, _ = d.c.Txn().Txn(dropOps(h.path, h.s.id, h.token), d.qopts(ctx))
	})
}

// dropOps deletes path if session sid has it locked at index.
func dropOps(path, sid string, index uint64) api.TxnOps {
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: path, Session: sid}},
		{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: path, Index: index}},
	}
}

// errSessionGone is the renewal error of a hold whose shared session
// ended.
func errSessionGone(path string) error {
	return fmt.Errorf("consul: renew %q: session invalidated: %w", path, driver.ErrLockLost)
}
