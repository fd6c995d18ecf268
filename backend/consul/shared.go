package consul

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// sharedSessions hands out the Locker's shared sessions: one per requested
// TTL backs every hold of the Locker with that TTL, so that many holds cost
// one session renewal per renewal round instead of one each (RenewBatch).
//
// A shared session that ends (its TTL ran out, or it was destroyed from
// outside) deletes every key it holds (behavior=delete), so every hold on
// it is lost, each with its own Done. A session whose renewal is due (a
// third of its TTL gone) is renewed before it backs a new hold, so that a
// new hold has at least two thirds of its TTL ahead; one older than three
// quarters of its TTL, or found gone, is replaced by a new session. A
// replaced session goes on serving its holds until the last one ends, and
// is then destroyed.
//
// Each hold keeps its own validity end, the one it would have on a
// session of its own. Before every renewal of a shared session, the holds
// whose validity has ended (nobody renewed them: autorenew off, or a
// watchdog that gave up) are swept: their keys are deleted and they are
// marked lost, so that the renewal that serves the other holds does not
// keep them too.
type sharedSessions struct {
	d     *consulDriver
	grant chan struct{} // one create or refresh of a current session at a time

	mu     sync.Mutex
	closed bool
	byTTL  map[time.Duration]*session // the current shared session of each TTL
	all    map[*session]struct{}      // every shared session not yet destroyed
}

func newSharedSessions(d *consulDriver) *sharedSessions {
	return &sharedSessions{
		d:     d,
		grant: make(chan struct{}, 1),
		byTTL: map[time.Duration]*session{},
		all:   map[*session]struct{}{},
	}
}

// get returns the shared session of ttl, counting one more user of it;
// the caller gives it back with put unless a hold on it is tracked.
func (ss *sharedSessions) get(ctx context.Context, ttl time.Duration) (*session, error) {
	for {
		s, err := ss.current(ttl)
		if err != nil {
			return nil, err
		}
		if s != nil && s.age() < 1.0/3 && s.use() {
			return s, nil
		}
		select {
		case ss.grant <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		s2, err := ss.fresh(ctx, ttl, s)
		<-ss.grant
		if s2 != nil || err != nil {
			return s2, err
		}
		// Another caller refreshed or replaced it meanwhile: look again.
	}
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

// fresh, in the grant turn, renews the current session seen (s) or
// replaces it, and returns it with one more user. It returns nil, nil if
// the current session is no longer s.
func (ss *sharedSessions) fresh(ctx context.Context, ttl time.Duration, s *session) (*session, error) {
	if cur, err := ss.current(ttl); err != nil || cur != s {
		return nil, err
	}
	if s != nil && s.age() < 3.0/4 {
		_, ok, err := ss.d.renewShared(ctx, s)
		switch {
		case err == nil && ok && s.use():
			return s, nil
		case err != nil && ctx.Err() != nil:
			return nil, err
		}
		// Gone, or not renewable now: a new session replaces it.
	}
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

// age is the part of its TTL the session has used since its last renewal.
func (s *session) age() float64 {
	since, ttl := s.state()
	return float64(time.Since(since)) / float64(ttl)
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
	s.holds[h] = until
	s.mu.Unlock()
}

// extend moves h's validity end to until, and reports false if h is no
// longer on s (swept, or its session found gone).
func (s *session) extend(h *hold, until time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.holds[h]; !ok {
		return false
	}
	s.holds[h] = until
	return true
}

// untrack ends h's use of s (released, or lost and released). It reports
// false if h was no longer on s.
func (ss *sharedSessions) untrack(h *hold) bool {
	s := h.s
	s.mu.Lock()
	_, ok := s.holds[h]
	if ok {
		delete(s.holds, h)
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
// forgets them.
func (s *session) expired(now time.Time) []*hold {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*hold
	for h, until := range s.holds {
		if !now.Before(until) {
			out = append(out, h)
			delete(s.holds, h)
			s.refs--
		}
	}
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
