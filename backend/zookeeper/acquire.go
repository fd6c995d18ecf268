package zookeeper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// errVanished: our node disappeared while we queued (its session expired,
// or an operator deleted it). The attempt starts again with a new node.
var errVanished = errors.New("zookeeper: our lock node disappeared while queued")

// attempt is one acquire of one key.
type attempt struct {
	req     driver.Request
	keyPath string // the key's znode, parent of the lock nodes
	guid    string // in our node's name, to find it again after a lost reply: the Owner, then new for every new node
	// seen is when our node was known to exist (its create answered, or
	// the node found): no earlier than its ctime, in our clock (see
	// minHeld).
	seen time.Time
	// turn is the attempt's place among the operations in flight (see
	// maxInFlight), held while its requests are, given up while it waits.
	turn *gate.Turn
}

func (d *zkDriver) newAttempt(req driver.Request) (*attempt, error) {
	if !isOwner(req.Owner) {
		return nil, fmt.Errorf("zookeeper: owner %q is not 32 lower-case hex digits", req.Owner)
	}
	if req.Key == "" || len(req.Key) > driver.MaxKeyLen {
		return nil, fmt.Errorf("zookeeper: key of %d bytes: want 1 to %d", len(req.Key), driver.MaxKeyLen)
	}
	return &attempt{req: req, keyPath: d.prefix + "/" + nodeName(req.Key), guid: req.Owner}, nil
}

// TryAcquire queues like Acquire but does not wait: if our node is not the
// first, it is deleted again and the key is reported held.
func (d *zkDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	return d.acquire(ctx, req, false)
}

// Acquire is the lock recipe: create a protected ephemeral sequential node
// under the key's znode, list the children, hold if ours is the lowest,
// otherwise watch only the node just before ours and list again when it
// goes. Waiters are served in the order they queued.
func (d *zkDriver) Acquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	return d.acquire(ctx, req, true)
}

func (d *zkDriver) acquire(ctx context.Context, req driver.Request, wait bool) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	a, err := d.newAttempt(req)
	if err != nil {
		return driver.Hold{}, err
	}
	var (
		vanished int
		outage   time.Time // when the connection first failed during this call
	)
	for retry := false; ; retry = true {
		if retry {
			// A new node gets a new GUID: the cleaner may still be
			// sweeping for nodes with the old one.
			a.guid = newGUID()
		}
		if a.turn, err = d.ops.Enter(ctx, d.closed); err != nil {
			return driver.Hold{}, err
		}
		path, created, err := d.create(ctx, a)
		var h driver.Hold
		if err == nil {
			h, err = d.queue(ctx, a, path, created, wait)
		}
		a.turn.Leave()
		switch {
		case err == nil:
			return h, nil
		case errors.Is(err, errVanished):
			if vanished++; vanished < 4 {
				continue
			}
			return h, driver.Unavailable(err)
		case wait && transient(err) && ctx.Err() == nil:
			// A blocking Lock rides out a lost connection (a leader
			// election, a server restart) for up to one session timeout:
			// the session, and the queue with it, survives that long.
			if outage.IsZero() {
				outage = time.Now()
			}
			if time.Since(outage) < d.sessionTimeout() {
				if err := d.pause(ctx, 100*time.Millisecond); err != nil {
					return h, err
				}
				continue
			}
		}
		return h, err
	}
}

// newGUID returns 32 random hex digits, like driver.Request.Owner.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// transient reports whether err is the connection failing, which a retry
// may not meet again.
func transient(err error) bool {
	return errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrSessionExpired)
}

// pause waits for d, ctx's end or Close.
func (d *zkDriver) pause(ctx context.Context, wait time.Duration) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-d.closed:
		return driver.ErrClosed
	}
}

func (d *zkDriver) children(ctx context.Context, path string) ([]string, error) {
	return call(ctx, func() ([]string, error) {
		c, _, err := d.conn.Children(path)
		return c, err
	})
}

type existsResult struct {
	ok  bool
	st  *zk.Stat
	ch  <-chan zk.Event
	err error
	// armed is the connection epoch (nodeWatches.epoch) within which the
	// watch was set, asked and answered; 0 when unknown.
	armed uint64
}

// queue waits, if wait is set, until our node at path is the lowest, and
// grants the hold. On any failure our node is deleted before returning.
// created is when the create that made our node was sent (zero if the node
// was found instead): the first listing needs no sync then (see create).
func (d *zkDriver) queue(ctx context.Context, a *attempt, path string, created time.Time, wait bool) (_ driver.Hold, err error) {
	name := path[strings.LastIndexByte(path, '/')+1:]
	queued := false // the server showed a node before ours
	defer func() {
		if err != nil && !errors.Is(err, errVanished) {
			d.leave(ctx, path)
		}
		if queued && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			// The wait outlasted ctx: a deadline, not an outage.
			err = fmt.Errorf("%w: %w", driver.ErrNotAcquired, err)
		}
	}()
	var (
		ownC chan existsResult
		own  *existsResult
	)
	// confirmed is the last instant the leader is known to have heard of
	// our session (a leader-ordered request sent then was answered): the
	// create's, else a sync's. A hold's lease runs from it, never from a
	// listing.
	confirmed := created
	for {
		// A listing from any server may grant the lock, even from a
		// follower cut off from the leader, whose copy lags: sequence
		// numbers only grow, and what a lagging copy shows is a state the
		// leader went through, so if it shows our node first, the leader
		// has it first too, or has deleted it. Only the end of our session
		// deletes it (or an operator, which our node's watch reports), and
		// that cannot come before confirmed plus half a session timeout,
		// where the monitor gives the hold up: grant counts the lease from
		// confirmed, and confirms the session again first when confirmed
		// is no longer fresh. So a waiter that is woken lists at once,
		// without a sync first (one round trip less per handoff). A
		// deletion the listing misses only makes us wait for a watch.
		if confirmed.IsZero() {
			// Our node was found after a lost reply: confirm first.
			sent := time.Now()
			if _, err := call(ctx, func() (string, error) { return d.conn.Sync(a.keyPath) }); err != nil {
				if errors.Is(err, zk.ErrNoNode) {
					return driver.Hold{}, errVanished
				}
				return driver.Hold{}, d.fail("sync", err)
			}
			confirmed = sent
		}
		sent := confirmed
		if ownC == nil {
			// Exists with a watch on our own node goes out alongside the
			// first listing: it gives the fencing token (czxid), the
			// session that owns the node, and a watch that reports the
			// node's deletion (through nodeWatches, which must expect
			// the path before the watch is set).
			if d.nodes != nil {
				d.nodes.expect(path)
				defer func() {
					if err != nil {
						d.nodes.forget(path)
					}
				}()
			}
			ownC = make(chan existsResult, 1)
			go func() {
				e := d.nodes.current()
				ok, st, ch, err := d.conn.ExistsW(path)
				r := existsResult{ok: ok, st: st, ch: ch, err: err}
				if err == nil && ok && e != 0 && d.nodes.current() == e {
					r.armed = e
				}
				ownC <- r
			}()
		}
		children, err := d.children(ctx, a.keyPath)
		if own == nil {
			select {
			case r := <-ownC:
				own = &r
			case <-ctx.Done():
				return driver.Hold{}, ctx.Err()
			}
			if own.err != nil {
				return driver.Hold{}, d.fail("look up own node", own.err)
			}
			if !own.ok {
				return driver.Hold{}, errVanished
			}
		}
		if errors.Is(err, zk.ErrNoNode) {
			return driver.Hold{}, errVanished
		}
		if err != nil {
			return driver.Hold{}, d.fail("list", err)
		}
		pred, found := "", false
		for _, n := range queue(children) {
			if n.name == name {
				found = true
				break
			}
			if hasGUID(n.name, a.guid) {
				// A duplicate from a create whose reply was lost.
				d.clean.node(a.keyPath+"/"+n.name, 0)
				continue
			}
			pred = n.name
		}
		switch {
		case !found:
			return driver.Hold{}, errVanished
		case pred == "" && hasMinHold(children):
			// The key's minimum-hold marker: the key may still be held by
			// the minimum of a hold that ended (see lapse.go).
			left, err := d.minHeld(ctx, a, own.st, a.req.MinHold > 0)
			if err != nil {
				return driver.Hold{}, err
			}
			if left <= 0 {
				return d.grant(ctx, a, path, own, sent)
			}
			if !wait {
				return driver.Hold{}, &driver.HeldError{Remaining: left}
			}
			queued = true
			a.turn.Leave()
			if err := d.pause(ctx, left); err != nil {
				return driver.Hold{}, err
			}
			if err := a.turn.Again(ctx, d.closed); err != nil {
				return driver.Hold{}, err
			}
			continue
		case pred == "":
			return d.grant(ctx, a, path, own, sent)
		case !wait:
			return driver.Hold{}, &driver.HeldError{}
		}
		queued = true
		a.turn.Leave()
		gone, err := d.await(ctx, a.keyPath+"/"+pred, path, own)
		if err != nil {
			return driver.Hold{}, err
		}
		if err := a.turn.Again(ctx, d.closed); err != nil {
			return driver.Hold{}, err
		}
		if gone {
			return driver.Hold{}, errVanished
		}
	}
}

// await waits until the node pred (the one before ours) changes. It
// reports whether our own node at path went meanwhile.
func (d *zkDriver) await(ctx context.Context, pred, path string, own *existsResult) (ownGone bool, err error) {
	r, err := call(ctx, func() (existsResult, error) {
		ok, st, ch, err := d.conn.ExistsW(pred)
		return existsResult{ok: ok, st: st, ch: ch, err: err}, err
	})
	if err != nil {
		return false, d.fail("watch predecessor", err)
	}
	if !r.ok {
		return false, nil
	}
	for {
		select {
		case <-r.ch:
			return false, nil
		case ev := <-own.ch:
			switch {
			case ev.Type == zk.EventNotWatching && errors.Is(ev.Err, zk.ErrClosing):
				return false, d.fail("wait", ev.Err)
			case ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching:
				return true, nil
			}
			// Some other change to our node: watch it again.
			n, err := call(ctx, func() (existsResult, error) {
				ok, st, ch, err := d.conn.ExistsW(path)
				return existsResult{ok: ok, st: st, ch: ch, err: err}, err
			})
			if err != nil {
				return false, d.fail("watch own node", err)
			}
			if !n.ok {
				return true, nil
			}
			own.ch, own.armed = n.ch, 0
		case <-ctx.Done():
			return false, ctx.Err()
		case <-d.closed:
			return false, driver.ErrClosed
		}
	}
}

// grant turns our node, now the lowest, into a hold. The lease runs from
// sent, the last request the leader ordered (the create, or a sync), or a
// later confirmation of the session, never from a listing.
//
// The monitor gives every hold up half a session timeout (lossAfter) after
// the last request that confirmed the session was sent. A create answered
// late (during a leader election, its request waits for the new leader)
// confirms the session only as of when it was sent, so a hold granted from
// it could be given up as soon as it was reported: Lock returned, and the
// hold was already lost. When the confirmation is older than half of
// lossAfter, the session is confirmed again with a sync and a read of our
// node, and the lease runs from that sync instead.
func (d *zkDriver) grant(ctx context.Context, a *attempt, path string, own *existsResult, sent time.Time) (driver.Hold, error) {
	st := own.st
	if st.EphemeralOwner == 0 || st.EphemeralOwner != d.conn.SessionID() {
		// Made by a session that has ended since: the node is gone, or
		// goes with it (the cleaner checks).
		d.clean.node(path, st.EphemeralOwner)
		return driver.Hold{}, errVanished
	}
	if st.Czxid <= 0 {
		return driver.Hold{}, fmt.Errorf("zookeeper: node %s has czxid %d", path, st.Czxid)
	}
	sent = d.mon.confirmedAt(st.EphemeralOwner, sent)
	if fresh := lossAfter(d.sessionTimeout()) / 2; time.Since(sent) > fresh {
		again, err := d.confirm(ctx, path, st.EphemeralOwner)
		if err != nil {
			return driver.Hold{}, err
		}
		sent = again
	}
	if a.req.MinHold > 0 {
		// The marker keeps the key held until the minimum has passed,
		// also if our session ends first; written only while our node
		// exists, so never for a hold that was not granted.
		if err := d.markMinHold(ctx, a.keyPath, path, a.req.MinHold, st.Czxid); err != nil {
			if errors.Is(err, driver.ErrNotHeld) {
				return driver.Hold{}, errVanished
			}
			return driver.Hold{}, err
		}
	}
	h := newHold(d, path, st, a.req.TTL, own.ch, own.armed, sent)
	return driver.Hold{Token: uint64(st.Czxid), TTL: a.req.TTL, Since: sent, Lost: h.lost.Chan(), State: h}, nil
}

// confirmAttempts bounds how often grant asks the leader to confirm the
// session before it gives up with ErrUnavailable.
const confirmAttempts = 4

// confirm confirms the session that owns our node at path with a sync and
// a read, and returns the instant the lease may run from. An answer that
// comes back too late to vouch for a lease (the monitor would give the
// hold up at once) is congestion as often as an outage: a burst of
// requests on the connection, or a loaded server, delays every answer for
// a while. So the confirmation is asked for again, up to confirmAttempts
// times while ctx lasts, before the attempt fails with ErrUnavailable;
// the node stays first in line meanwhile.
func (d *zkDriver) confirm(ctx context.Context, path string, owner int64) (time.Time, error) {
	var took time.Duration
	tries := 0
	for tries < confirmAttempts {
		tries++
		if d.beforeConfirm != nil {
			d.beforeConfirm()
		}
		again := time.Now()
		ok, err := call(ctx, func() (bool, error) {
			ok, _, err := d.syncRead(path)
			return ok, err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return time.Time{}, errVanished
		case err != nil:
			return time.Time{}, d.fail("confirm the session", err)
		case !ok || d.conn.SessionID() != owner:
			return time.Time{}, errVanished
		}
		if time.Since(d.mon.confirmedAt(owner, again)) < lossAfter(d.sessionTimeout()) {
			return again, nil
		}
		// Not even the heartbeats confirmed the session meanwhile.
		took = time.Since(again)
		if ctx.Err() != nil {
			break
		}
	}
	return time.Time{}, driver.Unavailable(fmt.Errorf("zookeeper: the session was confirmed only after %v (%d tries)",
		took.Round(time.Millisecond), tries))
}

// leave deletes our node after a failed or refused attempt, waiting a
// little even when ctx has ended, so that a caller that gave up leaves no
// queue entry behind that could block the next attempt; if the delete does
// not go through in time, the cleaner finishes it.
func (d *zkDriver) leave(ctx context.Context, path string) {
	if d.isClosed() && d.own { // the session ended with the conn, and its nodes with it
		return
	}
	wait := min(d.sessionTimeout()/2, time.Second)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	_, err := call(lctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(path, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		d.clean.node(path, 0)
	}
}
