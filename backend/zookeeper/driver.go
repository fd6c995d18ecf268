package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// zkDriver is one Locker's connection: a go-zookeeper Conn, the chroot its
// locks live under, and the background work that watches the session and
// removes nodes a cancelled or failed request may have left.
type zkDriver struct {
	conn   *zkConn
	own    bool // the Conn was dialled by Open: Close closes it
	prefix string
	acl    []zk.ACL
	sess   *sessionBox // the session the server granted last

	mon   *monitor
	clean *cleaner
	ops   gate.Gate    // acquisitions and releases with requests in flight
	nodes *nodeWatches // nil over a caller's Conn (no event callback)

	closed    chan struct{}
	closeOnce sync.Once

	beforeConfirm func() // tests: runs before each confirmation of the session in grant

	wg sync.WaitGroup // monitor, cleaner and hold goroutines
}

var (
	_ driver.Locker       = (*zkDriver)(nil)
	_ driver.Acquirer     = (*zkDriver)(nil)
	_ driver.Limiter      = (*zkDriver)(nil)
	_ driver.LossNotifier = (*zkDriver)(nil)
	_ driver.Recorder     = (*zkDriver)(nil)
)

// maxInFlight bounds the acquisitions and releases of one connection that
// may have requests on the server at once (see package gate).
//
// ZooKeeper answers a session's requests in the order they were sent, so
// the monitor's heartbeat (a sync and a read, see monitor) is answered
// only after every request queued before it. A burst of acquisitions on
// one Locker, each a create, an exists and a listing, put thousands of
// requests ahead of it: with 5,000 Locks at once on a 4s session the
// heartbeats went unanswered for longer than half the session timeout,
// every hold of the Locker was given up, though the server heard from the
// session all along, and some Locks failed because their grants could not
// confirm the session (TestBurstKeepsHolds). With the gate at most a few
// hundred requests stand before a heartbeat.
const maxInFlight = gate.Acquires

func newDriver(conn *zk.Conn, own bool, prefix string, acl []zk.ACL, sess *sessionBox) *zkDriver {
	d := &zkDriver{conn: &zkConn{Conn: conn}, own: own, prefix: prefix, acl: acl, sess: sess, closed: make(chan struct{}), ops: gate.New(maxInFlight)}
	d.mon = newMonitor(d)
	d.clean = newCleaner(d)
	if own {
		d.nodes = newNodeWatches() // dialDriver routes the events here
	}
	d.wg.Add(2)
	go d.mon.run()
	go d.clean.run()
	return d
}

// sessionTimeout is the session timeout the server granted, or the one the
// caller of New declared.
func (d *zkDriver) sessionTimeout() time.Duration { return d.sess.get().timeout }

// sessionBox holds the latest session a server granted over a connection.
type sessionBox struct{ p atomic.Pointer[session] }

func (b *sessionBox) set(s session) { b.p.Store(&s) }
func (b *sessionBox) get() session  { return *b.p.Load() }

// Limits: a lease is the session timeout, neither shorter nor longer. A
// holder that dies keeps its node, and so the lock, until its session
// expires, so a shorter TTL would promise the other clients something the
// server does not do; and the server may hand the lock on one session
// timeout after it last heard from the holder, so a longer one would let
// Lease().Expires run past that moment. A Locker made without a TTL uses
// the session timeout (dlock brings its default within these limits); an
// explicit other TTL is refused with dlock.ErrInvalidOption. See the
// package documentation.
func (d *zkDriver) Limits() driver.Limits {
	T := d.sessionTimeout()
	return driver.Limits{MinTTL: T, MaxTTL: T}
}

func (d *zkDriver) isClosed() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// check is what every call checks first.
func (d *zkDriver) check(ctx context.Context) error {
	if d.isClosed() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// syncRead sends a sync for path and then an Exists of path on the same
// connection. A server answers a session's requests in order, and a
// follower answers a sync only once it has applied everything the leader
// had committed when the leader handled it (an expired session's closing
// included), so the Exists reports the leader's state, not a follower's
// local copy, and its success shows that the session was live on the
// leader after the sync was sent. A follower cut off from the leader
// answers no sync.
func (d *zkDriver) syncRead(path string) (bool, *zk.Stat, error) {
	if _, err := d.conn.Sync(path); err != nil {
		return false, nil, err
	}
	return d.conn.Exists(path)
}

// fail maps a go-zookeeper error onto the driver's errors.
func (d *zkDriver) fail(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case d.isClosed():
		return fmt.Errorf("zookeeper: %s: %w", op, driver.ErrClosed)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed), errors.Is(err, zk.ErrInvalidACL),
		errors.Is(err, zk.ErrInvalidPath), errors.Is(err, zk.ErrBadArguments):
		return fmt.Errorf("zookeeper: %s: %w", op, err)
	default:
		return driver.Unavailable(fmt.Errorf("zookeeper: %s: %w", op, err))
	}
}

// call runs f, a blocking go-zookeeper request, so that ctx can end the
// wait for it. go-zookeeper's requests take no context: when ctx ends first
// f still runs to completion in the background and its results are dropped
// (callers whose request may change the server, such as a create, arrange
// for the cleanup themselves). A context that can never end costs no
// goroutine.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Close stops the background work and, when Open dialled the connection,
// closes it, which ends the session: the server deletes every node the
// session still had. A Conn given to New stays open; the caller closes it.
// Its session outlives the Locker, so Close first deletes what is still
// queued for deletion (a waiter's node whose delete did not go through, an
// abandoned create), for at most closeCleanTimeout: left there, such a node
// would block every other process's Lock on its key.
func (d *zkDriver) Close() error {
	d.closeOnce.Do(func() {
		if !d.own {
			d.clean.flush(time.Now().Add(closeCleanTimeout))
		}
		close(d.closed)
		if d.nodes != nil {
			for _, h := range d.nodes.all() {
				h.lose(driver.ErrClosed, false)
			}
		}
		// Every request still in flight (one whose caller stopped
		// waiting, or a background goroutine's) is answered before the
		// connection closes, or has the session timeout to be (see
		// zkConn). The Locker sends no new ones.
		d.conn.drain(min(d.sessionTimeout(), 2*time.Second))
		if d.own {
			d.conn.Close()
			d.wg.Wait()
		}
	})
	return nil
}
