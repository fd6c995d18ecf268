package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// zkHold is a granted lock: our ephemeral node, the session that owns it,
// and the lease the driver keeps on top of the session.
//
// The session alone would keep the node for as long as the process runs,
// since go-zookeeper pings in the background. A dlock lease must end when
// its holder stops renewing it, so the hold also has a deadline, moved by
// every Renew: when it passes, the driver deletes the node itself, as a
// server would expire a lease.
type zkHold struct {
	d    *zkDriver
	path string // our node
	sid  int64  // the session that owns it (its ephemeralOwner)
	ttl  time.Duration
	// lost is marked when the hold ends other than by Release; its channel
	// is the hold's Lost, and OnLost hangs the portable layer's callback on
	// it without a goroutine.
	lost driver.Loss
	// done is closed when the hold ends at all; it stops the watch
	// goroutine, and exists only with one (no nodeWatches).
	done chan struct{}

	mu       sync.Mutex
	deadline time.Time // the lease runs out here unless renewed
	timer    *time.Timer
	ended    bool
	cause    error // why the hold was lost; nil if released
	// armed is the connection epoch within which the watch on our node
	// was set and answered with the node ours, and no event of the node
	// came since; 0 when not so (see renewbatch.go). events counts the
	// node's events, so that a re-arm can tell that one came meanwhile.
	armed  uint64
	events uint64
}

// disarm records that an event of our node came: the watch has fired.
func (h *zkHold) disarm() {
	h.mu.Lock()
	h.armed = 0
	h.events++
	h.mu.Unlock()
}

func newHold(d *zkDriver, path string, st *zk.Stat, ttl time.Duration, watch <-chan zk.Event, armed uint64, since time.Time) *zkHold {
	h := &zkHold{
		d:        d,
		path:     path,
		sid:      st.EphemeralOwner,
		ttl:      ttl,
		deadline: since.Add(ttl),
		armed:    armed, // set before attach makes the hold visible to events
	}
	if d.nodes == nil {
		h.done = make(chan struct{})
	}
	h.mu.Lock()
	h.timer = time.AfterFunc(time.Until(h.deadline), h.expire)
	h.mu.Unlock()
	d.mon.add(h, since)
	if d.nodes != nil {
		if ev, ok := d.nodes.attach(path, h); ok {
			h.disarm()
			go h.nodeEvent(ev)
		}
		return h
	}
	d.wg.Add(1)
	go h.watch(watch)
	return h
}

func (h *zkHold) isEnded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

// OnLost calls f when the hold ends other than by Release.
func (d *zkDriver) OnLost(dh driver.Hold, f func()) func() bool {
	h, _ := dh.State.(*zkHold)
	if h == nil {
		return driver.ForeignLost(f)
	}
	return h.lost.OnLost(f)
}

// end marks the hold ended, once, and reports whether this call did it.
// cause is nil for a release.
func (h *zkHold) end(cause error) bool {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return false
	}
	h.ended = true
	h.cause = cause
	h.timer.Stop()
	h.mu.Unlock()
	if h.done != nil {
		close(h.done)
	}
	if cause != nil {
		h.lost.Mark()
	}
	h.d.mon.remove(h)
	if h.d.nodes != nil {
		h.d.nodes.detach(h.path, h)
	}
	return true
}

// lose ends the hold as lost. When the node may still exist (the lease ran
// out, or the session can no longer be vouched for), the cleaner deletes
// it, so that a lost hold never blocks the key.
func (h *zkHold) lose(cause error, mayExist bool) {
	if h.end(cause) && mayExist {
		h.d.clean.node(h.path, h.sid)
	}
}

// expire runs when the lease may have run out without a renewal.
func (h *zkHold) expire() {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return
	}
	if left := time.Until(h.deadline); left > 0 { // renewed meanwhile
		h.timer.Reset(left)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	h.lose(fmt.Errorf("lease of %v ran out without a renewal", h.ttl), true)
}

func holdOf(dh driver.Hold) (*zkHold, error) {
	h, _ := dh.State.(*zkHold)
	if h == nil {
		return nil, fmt.Errorf("zookeeper: foreign hold: %w", driver.ErrNotHeld)
	}
	return h, nil
}

// Release deletes our node. Its path carries our GUID and sequence number,
// so it can never be a successor's node.
func (d *zkDriver) Release(ctx context.Context, dh driver.Hold) error {
	h, err := holdOf(dh)
	if err != nil {
		return err
	}
	if !h.end(nil) {
		// Lost before (and deleted then, if it still existed) or released.
		return fmt.Errorf("zookeeper: release: %w", driver.ErrNotHeld)
	}
	if err := d.check(ctx); err != nil {
		if !errors.Is(err, driver.ErrClosed) {
			d.clean.node(h.path, h.sid)
		}
		return err
	}
	t, err := d.releaseTurn(ctx, h)
	if err != nil {
		return err
	}
	defer t.Leave()
	_, err = call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(h.path, -1) })
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zookeeper: release: node already gone (session expired or node deleted): %w", driver.ErrNotHeld)
	default:
		d.clean.node(h.path, h.sid)
		return d.fail("release", err)
	}
}

// releaseTurn waits for a turn to delete h's node (see maxInFlight). If
// ctx ends first, the node goes to the cleaner, as after a failed delete;
// if the driver closes, it does not, as when check refuses a release:
// the cleaner has stopped, and a Locker opened from a URL ended its
// session, and the session's nodes with it.
func (d *zkDriver) releaseTurn(ctx context.Context, h *zkHold) (*gate.Turn, error) {
	t, err := d.ops.Enter(ctx, d.closed)
	if err != nil && !errors.Is(err, driver.ErrClosed) {
		d.clean.node(h.path, h.sid)
	}
	return t, err
}

// Renew checks that our node still exists and belongs to our session,
// with a read the leader ordered (a sync, then an Exists; see syncRead),
// and moves the lease's deadline to a full TTL from when it asked. A
// follower's local read would not do: one cut off from the leader goes on
// answering after the leader has expired the session and granted the lock
// to another client.
func (d *zkDriver) Renew(ctx context.Context, dh driver.Hold) (time.Duration, error) {
	h, err := holdOf(dh)
	if err != nil {
		return 0, err
	}
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	return d.renewOne(ctx, h, false)
}

// renewOne is Renew for h, whose driver is d. With arm, the read after the
// sync sets a watch on our node as well, and h is armed with the
// connection's epoch if neither it nor the node changed meanwhile (see
// RenewBatch).
func (d *zkDriver) renewOne(ctx context.Context, h *zkHold, arm bool) (time.Duration, error) {
	h.mu.Lock()
	ended, cause := h.ended, h.cause
	h.mu.Unlock()
	if ended {
		return 0, endedErr(cause)
	}
	sent := time.Now()
	if d.conn.SessionID() != h.sid {
		cause := errors.New("session expired")
		h.lose(cause, true)
		return 0, fmt.Errorf("zookeeper: renew: %w: %w", driver.ErrLockLost, cause)
	}
	arm = arm && d.nodes != nil
	var e, events uint64
	if arm {
		e = d.nodes.current()
		h.mu.Lock()
		events = h.events
		h.mu.Unlock()
	}
	type stat struct {
		ok bool
		st *zk.Stat
	}
	s, err := call(ctx, func() (stat, error) {
		if !arm {
			ok, st, err := d.syncRead(h.path)
			return stat{ok, st}, err
		}
		if _, err := d.conn.Sync(h.path); err != nil {
			return stat{}, err
		}
		ok, st, _, err := d.conn.ExistsW(h.path)
		return stat{ok, st}, err
	})
	if err != nil {
		return 0, d.fail("renew", err)
	}
	if !s.ok || s.st.EphemeralOwner != h.sid || d.conn.SessionID() != h.sid {
		cause := errors.New("node deleted or session expired")
		h.lose(cause, s.ok)
		return 0, fmt.Errorf("zookeeper: renew: %w: %w", driver.ErrLockLost, cause)
	}
	ttl, err := h.extend(sent)
	if err != nil {
		return 0, err
	}
	if arm {
		h.mu.Lock()
		if h.events == events && d.nodes.current() == e {
			h.armed = e
		}
		h.mu.Unlock()
	}
	d.mon.confirm(h.sid, sent)
	return ttl, nil
}

// extend moves h's lease deadline to a full TTL from sent, when a check
// sent then found the hold still ours.
func (h *zkHold) extend(sent time.Time) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return 0, endedErr(h.cause)
	}
	if d := sent.Add(h.ttl); d.After(h.deadline) {
		h.deadline = d
		h.timer.Reset(time.Until(h.deadline))
	}
	return h.ttl, nil
}

// endedErr is Renew's error for a hold that has ended: lost, or released.
func endedErr(cause error) error {
	if cause == nil {
		return fmt.Errorf("zookeeper: renew: %w", driver.ErrNotHeld)
	}
	return fmt.Errorf("zookeeper: renew: %w: %w", driver.ErrLockLost, cause)
}
