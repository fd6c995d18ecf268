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
)

// hold is one queue entry: a waiter's, then a holder's.
type hold struct {
	queue string // the key's queue prefix
	key   string // the entry: queue + owner
	rev   int64  // its create revision: the fencing token
	// lz is the lease the entry is on. It changes only when a renewal
	// moves the entry off a retired lease (see rehome), under moving.
	lz     atomic.Pointer[lease]
	moving sync.Mutex
	// released is set, under moving, when Release or ReleaseAfter takes
	// the entry: it is not moved after that.
	released bool
	// stranded is set, under moving, when a move's outcome is unknown:
	// the entry is not moved again, and is deleted once the hold's
	// window on its old lease has ended (see rehome).
	stranded bool
	// registered is when the loss watch began to cover this hold
	// (lossWatch.add; under its mutex).
	registered time.Time

	ctx    context.Context // ends the entry's watches
	cancel context.CancelFunc

	// lost is marked when the entry is deleted other than by Release; its
	// channel is the hold's Lost, and OnLost hangs the portable layer's
	// callback on it without a goroutine.
	lost driver.Loss
}

func (d *drv) newHold(queue, key string, rev int64, l *lease) *hold {
	ctx, cancel := context.WithCancel(d.leaderCtx)
	d.live.Store(key, rev)
	h := &hold{queue: queue, key: key, rev: rev, ctx: ctx, cancel: cancel}
	h.lz.Store(l)
	return h
}

// lease returns the lease h's entry is on.
func (h *hold) lease() *lease { return h.lz.Load() }

// release marks h taken by Release or ReleaseAfter, after any move of its
// entry in progress (see rehome): from then on its lease no longer
// changes.
func (h *hold) release() {
	h.moving.Lock()
	h.released = true
	h.moving.Unlock()
}

// forget drops h from the driver's live entries (released, abandoned or
// lost).
func (d *drv) forget(h *hold) { d.live.CompareAndDelete(h.key, h.rev) }

func (h *hold) ttl() time.Duration {
	_, ttl := h.lease().state()
	return ttl
}

// lazyWatch is how long a waiter waits before its own entry is watched
// (see drv.wait). A watch costs the server about as much as the lock
// itself, and most waits are short; started from the entry's create
// revision, the late watch still reports a deletion that happened before
// it existed.
const lazyWatch = 20 * time.Millisecond

// granted turns h into a driver.Hold and registers it with the Locker's
// loss watch (see lossWatch): lease expiry or revocation deletes its
// entry. own, the watch of h's entry set up while waiting, if any, is no
// longer needed. Since is the send time of the grant or keepalive that
// last extended the lease, which may predate a long wait.
func (d *drv) granted(h *hold, own keyWatch) driver.Hold {
	own.stop()
	d.loss.add(h)
	since, ttl := h.lease().state()
	if h.lease().shared {
		h.lease().track(h, since.Add(ttl))
	}
	return driver.Hold{Token: uint64(h.rev), TTL: ttl, Since: since, Lost: h.lost.Chan(), State: h}
}

// OnLost calls f when h's entry is deleted other than by Release.
func (d *drv) OnLost(dh driver.Hold, f func()) func() bool {
	h, _ := dh.State.(*hold)
	if h == nil {
		return driver.ForeignLost(f)
	}
	return h.lost.OnLost(f)
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
	d.forget(h)
	d.loss.remove(h)
	h.release()
	until := h.validUntil()
	if h.lease().shared {
		h.lease().untrack(h)
	}
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return err
	}
	defer leave(&err)
	deleted, err := d.deleteEntry(ctx, h, until)
	if err != nil {
		if h.lease().shared {
			d.leases.put(h.lease())
			d.dropLater(h.key, h.rev)
		} else {
			d.undo(ctx, h.lease(), h.key)
		}
		return mapErr(ctx, err)
	}
	d.leases.put(h.lease())
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
// when a retried delete finds the entry gone before until, the instant up
// to which nothing but this release could have deleted it (see
// hold.validUntil; only a Break at the same moment could), the entry
// counts as deleted by this call. A zero until forgives nothing.
func (d *drv) deleteEntry(ctx context.Context, h *hold, until time.Time) (bool, error) {
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
	if !resp.Succeeded && attempts > 1 && time.Now().Before(until) {
		return true, nil
	}
	return resp.Succeeded, nil
}

// validUntil is the instant before which neither the server nor this
// driver deletes h's entry: the server expires a lease no sooner than its
// TTL after the send time of its grant or last confirmed keepalive, and on
// a shared lease the sweep deletes h's entry once h's own validity has
// ended (zero when h is no longer tracked there: swept already).
func (h *hold) validUntil() time.Time {
	since, ttl := h.lease().state()
	if since.IsZero() {
		return time.Time{}
	}
	until := since.Add(ttl)
	if h.lease().shared {
		own, ok := h.lease().validity(h)
		if !ok {
			return time.Time{}
		}
		if own.Before(until) {
			until = own
		}
	}
	return until
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
	start := time.Now()
	err = retry(ctx, func(ctx context.Context) error { return d.keepAliveConfirmed(ctx, h) })
	if errors.Is(err, errRetired) {
		err = d.rehome(ctx, h, start)
	}
	if err != nil {
		return 0, mapErr(ctx, err)
	}
	return h.ttl(), nil
}

// keepAliveConfirmed keeps h's lease alive once and then reads h's entry,
// linearizably: the read shows the entry still exists and confirms the
// keepalive (see extension). A keepalive it cannot confirm is an
// ErrUnavailable error, to be tried again. Renewals of one lease take
// turns (lease.turn): the read confirms only the keepalive sent just
// before it, never one another goroutine sent meanwhile.
func (d *drv) keepAliveConfirmed(ctx context.Context, h *hold) error {
	if err := h.lease().take(ctx); err != nil {
		return err
	}
	defer h.lease().give()
	if err := d.leases.keepAlive(ctx, h.lease()); err != nil {
		return err
	}
	resp, err := d.cli.Get(ctx, h.key, clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
		return fmt.Errorf("etcd: lock entry deleted: %w", driver.ErrLockLost)
	}
	if err := d.leases.confirm(h.lease(), resp.Header.RaftTerm); err != nil {
		return driver.Unavailable(err)
	}
	if h.lease().shared {
		since, ttl := h.lease().state()
		h.lease().track(h, since.Add(ttl))
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
