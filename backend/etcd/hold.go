package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// hold is one queue entry: a waiter's, then a holder's.
type hold struct {
	queue string // the key's queue prefix
	key   string // the entry: queue + owner
	rev   int64  // its create revision: the fencing token
	lease *lease

	ctx    context.Context // ends the entry's watches
	cancel context.CancelFunc

	lost     chan struct{}
	lostOnce sync.Once
}

func (d *drv) newHold(queue, key string, rev int64, l *lease) *hold {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(d.ctx))
	return &hold{queue: queue, key: key, rev: rev, lease: l, ctx: ctx, cancel: cancel, lost: make(chan struct{})}
}

func (h *hold) ttl() time.Duration {
	_, ttl := h.lease.state()
	return ttl
}

func (h *hold) markLost() { h.lostOnce.Do(func() { close(h.lost) }) }

// lazyWatch is how long a hold granted at once runs before its entry is
// watched. A watch costs the server about as much as the lock itself, and
// most holds are short; started from the entry's create revision, the late
// watch still reports a deletion that happened before it existed.
const lazyWatch = 20 * time.Millisecond

// granted turns h into a driver.Hold and starts watching its entry for
// deletion: lease expiry or revocation deletes it. own is the watch set up
// while waiting, if any. Since is the send time of the grant or keepalive
// that last extended the lease, which may predate a long wait.
func (d *drv) granted(h *hold, own keyWatch) driver.Hold {
	d.watchers.Add(1)
	go d.watchLost(h, own)
	since, ttl := h.lease.state()
	return driver.Hold{Token: uint64(h.rev), TTL: ttl, Since: since, Lost: h.lost, State: h}
}

// watchLost closes h.lost when h's entry is deleted by anyone but Release.
// A broken watch is re-established after checking the entry still exists.
func (d *drv) watchLost(h *hold, w keyWatch) {
	defer d.watchers.Done()
	defer func() { w.stop() }()
	if w.ch == nil {
		t := time.NewTimer(lazyWatch)
		select {
		case <-t.C:
			w = d.watchDelete(h.ctx, h.key, clientv3.WithRev(h.rev+1))
		case <-h.ctx.Done():
			t.Stop()
			return
		}
	}
	for {
		select {
		case wr, ok := <-w.ch:
			if ok && wr.Err() == nil {
				if deletedAfter(wr, h.rev) {
					h.markLost()
					return
				}
				continue
			}
			w.stop()
			var alive bool
			if w, alive = d.rewatch(h); !alive {
				return
			}
		case <-h.ctx.Done():
			return
		}
	}
}

// rewatch checks that h's entry still exists and watches it again from the
// revision of that read. It retries until the read answers or h ends.
func (d *drv) rewatch(h *hold) (keyWatch, bool) {
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if h.ctx.Err() != nil {
			return keyWatch{}, false
		}
		ctx, cancel := context.WithTimeout(h.ctx, max(h.ttl()/3, time.Second))
		resp, err := d.cli.Get(ctx, h.key, clientv3.WithKeysOnly())
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
				h.markLost()
				return keyWatch{}, false
			}
			return d.watchDelete(h.ctx, h.key, clientv3.WithRev(resp.Header.Revision+1)), true
		}
		select {
		case <-time.After(backoff):
		case <-h.ctx.Done():
		}
	}
}

// Release deletes h's entry if its create revision is still h's, so that a
// stale or retried release never deletes a later entry. The lease, which
// then carries no key, goes back to the pool.
func (d *drv) Release(ctx context.Context, dh driver.Hold) (err error) {
	h, ok := dh.State.(*hold)
	if !ok || h == nil {
		return fmt.Errorf("etcd: foreign hold: %w", driver.ErrNotHeld)
	}
	h.cancel()
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return err
	}
	defer leave(&err)
	deleted, err := d.deleteEntry(ctx, h)
	if err != nil {
		d.undo(ctx, h.lease)
		return mapErr(ctx, err)
	}
	d.leases.put(h.lease)
	if !deleted {
		return fmt.Errorf("etcd: lock entry already gone: %w", driver.ErrNotHeld)
	}
	return nil
}

// deleteEntry deletes h's entry if its create revision is still h's. The
// guard makes it safe to send again, so it is retried across a leader
// election. It reports whether the entry was still there.
//
// An attempt not answered within its bound may still have been applied: a
// later attempt then finds the entry gone by that attempt's own hand. So
// when a retried delete finds the entry gone while h's lease is known to be
// alive (it cannot have expired, and nothing but a Break at the same moment
// deletes a live lease's entry), the entry counts as deleted by this call.
func (d *drv) deleteEntry(ctx context.Context, h *hold) (bool, error) {
	var resp *clientv3.TxnResponse
	attempts := 0
	err := retry(ctx, func(ctx context.Context) (err error) {
		attempts++
		resp, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
			Then(clientv3.OpDelete(h.key)).
			Commit()
		return err
	})
	if err != nil {
		return false, err
	}
	if !resp.Succeeded && attempts > 1 && h.leaseAlive() {
		return true, nil
	}
	return resp.Succeeded, nil
}

// leaseAlive reports whether h's lease cannot have expired yet: the server
// expires it no sooner than its TTL after the send time of the grant or of
// the last confirmed keepalive.
func (h *hold) leaseAlive() bool {
	since, ttl := h.lease.state()
	return !since.IsZero() && time.Now().Before(since.Add(ttl))
}

// Renew keeps h's lease alive once and checks that h's entry still exists.
func (d *drv) Renew(ctx context.Context, dh driver.Hold) (_ time.Duration, err error) {
	h, ok := dh.State.(*hold)
	if !ok || h == nil {
		return 0, fmt.Errorf("etcd: foreign hold: %w", driver.ErrNotHeld)
	}
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer leave(&err)
	if err := retry(ctx, func(ctx context.Context) error { return d.keepAliveConfirmed(ctx, h) }); err != nil {
		return 0, mapErr(ctx, err)
	}
	return h.ttl(), nil
}

// errDeposed is returned when a keepalive was answered in an older raft
// term than the read that followed it: possibly by a leader that had
// already been replaced, which extends nothing (see extension).
var errDeposed = errors.New("etcd: keepalive answered by a leader that may have been deposed")

// keepAliveConfirmed keeps h's lease alive once and then reads h's entry,
// linearizably: the read shows the entry still exists and confirms the
// keepalive (see extension). A keepalive it cannot confirm is an
// ErrUnavailable error, to be tried again. Renewals of one lease take
// turns (lease.turn): the read confirms only the keepalive sent just
// before it, never one another goroutine sent meanwhile.
func (d *drv) keepAliveConfirmed(ctx context.Context, h *hold) error {
	if err := h.lease.take(ctx); err != nil {
		return err
	}
	defer h.lease.give()
	if err := d.leases.keepAlive(ctx, h.lease); err != nil {
		return err
	}
	resp, err := d.cli.Get(ctx, h.key, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
		return fmt.Errorf("etcd: lock entry deleted: %w", driver.ErrLockLost)
	}
	if !h.lease.confirm(resp.Header.RaftTerm) {
		return driver.Unavailable(errDeposed)
	}
	return nil
}

// keyWatch watches one key for its deletion (puts are filtered out).
type keyWatch struct {
	ch     clientv3.WatchChan
	cancel context.CancelFunc
}

func (d *drv) watchDelete(parent context.Context, key string, opts ...clientv3.OpOption) keyWatch {
	ctx, cancel := context.WithCancel(parent)
	opts = append(opts, clientv3.WithFilterPut())
	return keyWatch{ch: d.cli.Watch(ctx, key, opts...), cancel: cancel}
}

// stop cancels the watch; a stopped keyWatch has a nil channel.
func (w *keyWatch) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	*w = keyWatch{}
}

// created waits for the creation notice of a watch made with
// WithCreatedNotify: from then on it reports every change. It returns the
// revision the watch started after.
func (d *drv) created(ctx context.Context, w keyWatch) (int64, error) {
	select {
	case wr, ok := <-w.ch:
		switch {
		case !ok:
			if d.isDone() {
				return 0, driver.ErrClosed
			}
			return 0, driver.Unavailable(errWatchBroken)
		case wr.Err() != nil:
			return 0, mapErr(ctx, wr.Err())
		case !wr.Created:
			return 0, driver.Unavailable(fmt.Errorf("etcd: watch answered before its creation notice"))
		}
		return wr.Header.Revision, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-d.closed:
		return 0, driver.ErrClosed
	}
}
