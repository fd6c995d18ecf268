package zookeeper

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// monitor decides, for one connection, when its holds must be given up
// because the session can no longer be vouched for.
//
// ZooKeeper's leader expires a session that it has not heard from for the
// session timeout T. A client cut off from the servers sees only silence:
// it cannot tell a slow network from an expired session (Curator's
// SUSPENDED state). A client of a follower that is cut off from the leader
// sees worse: the follower goes on answering reads and pings from its own
// copy of the data (for up to syncLimit x tickTime) while the leader lets
// the session expire, deletes its nodes and grants the lock to someone
// else. So only answers the leader ordered confirm the session: a sync
// (the follower forwards it to the leader and answers once it has applied
// everything the leader committed before it, the session's closing
// included) followed by a read on the same connection. The instant such a
// request was sent ("confirmed") bounds when the leader last heard of the
// session, up to one lag: a follower passes a session's activity on to the
// leader with its answer to the leader's next ping, at most tickTime/2
// later, so what the leader heard last may be the request before, one
// heartbeat earlier. The monitor therefore sends a heartbeat every T/10
// while holds exist (go-zookeeper's own pings are not visible to it), and
// declares every hold lost once confirmed + T/2 - drift has passed without
// a fresh answer (Curator's LOST): before the leader can have expired the
// session, as long as tickTime is at most T/3 (T/2 for a session that has
// been busy for a heartbeat). Holds are also lost at once when the
// connection comes back with a different session.
type monitor struct {
	d    *zkDriver
	kick chan struct{}

	mu        sync.Mutex
	holds     map[*zkHold]struct{}
	sid       int64     // the session confirmed belongs to
	confirmed time.Time // a leader-ordered request sent then was answered within sid
	beating   int       // heartbeats in flight
	lastBeat  time.Time // when the last heartbeat was sent
	nextBeat  time.Time // no heartbeat before this (back-off after a failure)
}

// maxBeating bounds the heartbeats in flight: a slow answer does not hold
// the next heartbeat back, so the session stays busy every T/10 while the
// connection carries requests.
const maxBeating = 3

// beatEvery is the heartbeat period for session timeout T.
func beatEvery(T time.Duration) time.Duration { return T / 10 }

// lossAfter is how long after the last confirmed instant the holds are
// given up: half the session timeout, less the portable layer's drift
// allowance, driver.DriftAllowance (see monitor).
func lossAfter(T time.Duration) time.Duration { return T/2 - driver.DriftAllowance(T) }

func newMonitor(d *zkDriver) *monitor {
	return &monitor{d: d, kick: make(chan struct{}, 1), holds: map[*zkHold]struct{}{}}
}

func (m *monitor) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// add starts watching h, whose grant was confirmed by a request sent at
// since.
func (m *monitor) add(h *zkHold, since time.Time) {
	m.mu.Lock()
	m.holds[h] = struct{}{}
	m.confirmLocked(h.sid, since)
	m.mu.Unlock()
	m.poke()
}

func (m *monitor) remove(h *zkHold) {
	m.mu.Lock()
	delete(m.holds, h)
	m.mu.Unlock()
}

// confirm records that a request sent at t was answered within session sid.
func (m *monitor) confirm(sid int64, t time.Time) {
	m.mu.Lock()
	m.confirmLocked(sid, t)
	m.mu.Unlock()
}

func (m *monitor) confirmLocked(sid int64, t time.Time) {
	if sid == 0 {
		return
	}
	if sid != m.sid {
		m.sid, m.confirmed = sid, t
		return
	}
	if t.After(m.confirmed) {
		m.confirmed = t
	}
}

// confirmedAt is the latest instant the session sid is confirmed as of:
// since, or a later confirmation the monitor holds for sid.
func (m *monitor) confirmedAt(sid int64, since time.Time) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sid == m.sid && m.confirmed.After(since) {
		return m.confirmed
	}
	return since
}

func (m *monitor) run() {
	defer m.d.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := m.step()
		var tc <-chan time.Time
		if wait > 0 {
			timer.Reset(wait)
			tc = timer.C
		}
		select {
		case <-m.d.closed:
			return
		case <-m.kick:
		case <-tc:
		}
		timer.Stop()
	}
}

// step loses the holds that can no longer be vouched for, starts a
// heartbeat when one is due, and returns how long to sleep (0: until
// kicked, there being no holds).
func (m *monitor) step() time.Duration {
	T := m.d.sessionTimeout()
	now := time.Now()
	cur := m.d.conn.SessionID()
	type loss struct {
		h     *zkHold
		cause error
	}
	var lost []loss
	m.mu.Lock()
	lostAt := m.confirmed.Add(lossAfter(T))
	for h := range m.holds {
		switch {
		case h.sid != cur:
			lost = append(lost, loss{h, fmt.Errorf("session 0x%x ended (now 0x%x)", h.sid, cur)})
		case h.sid != m.sid || !now.Before(lostAt):
			lost = append(lost, loss{h, fmt.Errorf("no answer from ZooKeeper since %v, %v ago: session 0x%x may have expired (timeout %v)",
				m.confirmed.Format(time.StampMilli), now.Sub(m.confirmed).Round(time.Millisecond), h.sid, T)})
		}
	}
	for _, l := range lost {
		delete(m.holds, l.h)
	}
	n := len(m.holds)
	beatAt := m.confirmed
	if m.lastBeat.After(beatAt) {
		beatAt = m.lastBeat
	}
	beatAt = beatAt.Add(beatEvery(T))
	if beatAt.Before(m.nextBeat) {
		beatAt = m.nextBeat
	}
	beat := n > 0 && m.beating < maxBeating && !now.Before(beatAt)
	if beat {
		m.beating++
		m.lastBeat = now
	}
	full := m.beating >= maxBeating
	m.mu.Unlock()

	for _, l := range lost {
		l.h.lose(l.cause, true)
	}
	if beat {
		m.d.wg.Add(1)
		go m.heartbeat(cur, T)
	}
	if n == 0 {
		return 0
	}
	next := lostAt
	if beat {
		beatAt = now.Add(beatEvery(T))
	}
	if !full && beatAt.Before(next) {
		next = beatAt
	}
	return max(time.Until(next), time.Millisecond)
}

// heartbeat sends one sync and one cheap read after it and, if both are
// answered within session sid, confirms the session as of when the sync
// was sent: the answer is ordered by the leader (see monitor).
func (m *monitor) heartbeat(sid int64, T time.Duration) {
	defer m.d.wg.Done()
	sent := time.Now()
	_, _, err := m.d.syncRead("/")
	m.mu.Lock()
	m.beating--
	if err == nil && m.d.conn.SessionID() == sid {
		m.confirmLocked(sid, sent)
	} else {
		m.nextBeat = time.Now().Add(max(driver.RetryInterval(T), 10*time.Millisecond))
	}
	m.mu.Unlock()
	m.poke()
}

// event is go-zookeeper's callback for a connection dialled by Open: any
// session event may change what the monitor should conclude.
func (m *monitor) event(ev zk.Event) {
	if ev.Type == zk.EventSession {
		m.d.nodes.session()
		m.poke()
		return
	}
	if m.d.nodes != nil {
		m.d.nodes.event(ev)
	}
}
