package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Lapser = (*drv)(nil)

// ReleaseAfter lets h lapse: its entry stays at the head of the key's
// queue for d more, then goes, as a release's would. A lease of its own,
// of d rounded up to whole seconds (and to etcd's minimum lease, which the
// server applies), is granted, and one transaction guarded by the entry's
// create revision moves the entry onto it: a put keeps the create
// revision, so the queue's order and the fencing token are unchanged, and
// the waiters, which watch for deletions only, see nothing until the
// lease expires and deletes the entry. That lease is no longer the
// Locker's: no keepalive, no revoke at Close, and the Locker's own lease
// (shared with its other holds) can end without touching the entry.
//
// If the entry is no longer h's (broken, expired), nothing is written, the
// new lease is revoked and the error wraps ErrNotHeld. If the transaction's
// outcome stays unknown, the entry is left where it was for d more: on a
// lease of its own, that lease is no longer renewed (it outlasts d, the
// portable layer having raised the TTL to the minimum); on the shared
// lease, the sweep deletes it once d has passed, or the shared lease runs
// out if nothing else keeps it alive (Close then revokes the shared lease
// and ends it early).
func (d *drv) ReleaseAfter(ctx context.Context, dh driver.Hold, dur time.Duration) (err error) {
	h, ok := dh.State.(*hold)
	if !ok || h == nil {
		return fmt.Errorf("etcd: foreign hold: %w", driver.ErrNotHeld)
	}
	if dur <= 0 {
		return d.Release(ctx, dh)
	}
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return err
	}
	defer leave(&err)
	h.cancel()
	d.forget(h)
	d.loss.remove(h)
	h.release()
	if h.lease().shared {
		h.lease().untrack(h)
	}
	start := time.Now()
	var g *clientv3.LeaseGrantResponse
	err = onLeader(ctx, func(ctx context.Context) (err error) {
		g, err = d.cli.Grant(ctx, seconds(dur))
		return err
	})
	if err != nil {
		d.lapseInPlace(h, start.Add(dur))
		return mapErr(ctx, err)
	}
	resp, err := d.moveEntry(ctx, h, g.ID)
	if err != nil {
		d.lapseInPlace(h, start.Add(dur))
		return mapErr(ctx, err)
	}
	d.leases.put(h.lease()) // it carries the entry no more
	if !resp.Succeeded {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		_, _ = d.cli.Revoke(cctx, g.ID)
		cancel()
		return fmt.Errorf("etcd: lock entry already gone: %w", driver.ErrNotHeld)
	}
	return nil
}

// lapseInPlace leaves h's entry on its own lease until until, when the
// lapse could not move it: a lease of its own is simply no longer renewed
// (nor pooled, nor revoked); on the shared lease the entry is tracked
// again with until as its validity, for the sweep to delete, and counted
// among the driver's live entries until then. It keeps the name the
// Locker's next entry for the key would take on that lease: as a live
// entry it is no orphan for an acquire to delete (dropOrphan), and the
// next enqueue takes a lease of its own instead (nameTaken).
func (d *drv) lapseInPlace(h *hold, until time.Time) {
	if h.lease().shared {
		d.live.Store(h.key, h.rev)
		h.lease().track(h, until)
		d.leases.put(h.lease())
	}
}

// nameTaken reports whether one of the driver's own entries, live or
// lapsing in place, is named key: an enqueue must then not write under
// that name, nor undo a write under it whose outcome it does not know.
func (d *drv) nameTaken(key string) bool {
	_, ok := d.live.Load(key)
	return ok
}

// lapsed reports whether resp, an enqueue transaction that failed because
// its entry name on lease l was taken, found that name on another lease:
// the entry of an earlier hold of this Locker, moved onto a lease of its
// own by ReleaseAfter and still lapsing.
func lapsed(resp *clientv3.TxnResponse, l *lease) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	return len(kvs) > 0 && clientv3.LeaseID(kvs[0].Lease) != l.id
}
