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
)

// zkDriver is one Locker's connection: a go-zookeeper Conn, the chroot its
// locks live under, and the background work that watches the session and
// removes nodes a cancelled or failed request may have left.
type zkDriver struct {
	conn   *zk.Conn
	own    bool // the Conn was dialled by Open: Close closes it
	prefix string
	acl    []zk.ACL
	sess   *sessionBox // the session the server granted last

	mon   *monitor
	clean *cleaner

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // monitor, cleaner and hold goroutines
}

var (
	_ driver.Locker   = (*zkDriver)(nil)
	_ driver.Acquirer = (*zkDriver)(nil)
	_ driver.Limiter  = (*zkDriver)(nil)
)

func newDriver(conn *zk.Conn, own bool, prefix string, acl []zk.ACL, sess *sessionBox) *zkDriver {
	d := &zkDriver{conn: conn, own: own, prefix: prefix, acl: acl, sess: sess, closed: make(chan struct{})}
	d.mon = newMonitor(d)
	d.clean = newCleaner(d)
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

// Limits: a lease can be no shorter than the session timeout, since a
// holder that dies keeps its node, and so the lock, until its session
// expires. See the package documentation.
func (d *zkDriver) Limits() driver.Limits { return driver.Limits{MinTTL: d.sessionTimeout()} }

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
		if d.own {
			d.conn.Close()
			d.wg.Wait()
		}
	})
	return nil
}
