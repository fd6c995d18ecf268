package zookeeper

import (
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// monitor decides, for one connection, when its holds must be given up
// because the session can no longer be vouched for.
//
// ZooKeeper expires a session that it has not heard from for the session
// timeout T. A client cut off from the servers sees only silence: it
// cannot tell a slow network from an expired session (Curator's SUSPENDED
// state). What it does know is the last time it sent a request that was
// answered within the session: the server heard from the session at or
// after that time, so the session lives at least until then + T. The
// monitor keeps that instant ("confirmed") fresh while holds exist, with
// a cheap Exists every T/3 (go-zookeeper's own pings are not visible to
// it), and declares every hold lost once confirmed + 0.9*T - drift has
// passed without a fresh answer (Curator's LOST), that is before the
// server can have expired the session. Holds are also lost at once when
// the connection comes back with a different session.
type monitor struct {
	d    *zkDriver
	kick chan struct{}

	mu        sync.Mutex
	holds     map[*zkHold]struct{}
	sid       int64     // the session confirmed belongs to
	confirmed time.Time // a request sent then was answered within sid
	beating   bool      // a heartbeat is in flight
	nextBeat  time.Time // no heartbeat before this (back-off after a failure)
}

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

// drift allows for the server's clock running faster than ours, as the
// portable layer does for leases: 1% plus 2ms.
func drift(d time.Duration) time.Duration { return d/100 + 2*time.Millisecond }

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
	lostAt := m.confirmed.Add(T - T/10 - drift(T))
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
	beatAt := m.confirmed.Add(T / 3)
	if beatAt.Before(m.nextBeat) {
		beatAt = m.nextBeat
	}
	beat := n > 0 && !m.beating && !now.Before(beatAt)
	if beat {
		m.beating = true
	}
	beating := m.beating
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
	if !beating && beatAt.Before(next) {
		next = beatAt
	}
	return max(time.Until(next), time.Millisecond)
}

// heartbeat sends one cheap request and, if it is answered within session
// sid, confirms the session as of when it was sent.
func (m *monitor) heartbeat(sid int64, T time.Duration) {
	defer m.d.wg.Done()
	sent := time.Now()
	_, _, err := m.d.conn.Exists("/")
	m.mu.Lock()
	m.beating = false
	if err == nil && m.d.conn.SessionID() == sid {
		m.confirmLocked(sid, sent)
	} else {
		m.nextBeat = time.Now().Add(max(T/20, 10*time.Millisecond))
	}
	m.mu.Unlock()
	m.poke()
}

// event is go-zookeeper's callback for a connection dialled by Open: any
// session event may change what the monitor should conclude.
func (m *monitor) event(ev zk.Event) {
	if ev.Type == zk.EventSession {
		m.poke()
	}
}
