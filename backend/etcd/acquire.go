package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/linger"
)

// TryAcquire takes req.Key only if its queue is empty. The put is
// conditional on the whole queue prefix having no key, so a failed attempt
// writes nothing at all: there is no queue entry to remove, and a TryLock
// never jumps ahead of queued waiters.
func (d *drv) TryAcquire(ctx context.Context, req driver.Request) (_ driver.Hold, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return driver.Hold{}, err
	}
	defer leave(&err)
	turn, err := d.ops.Enter(ctx, nil)
	if err != nil {
		return driver.Hold{}, err
	}
	defer turn.Leave()
	q := d.queue(req.Key)
	for retried := false; ; retried = true {
		l, err := d.leases.get(ctx, req.TTL)
		if err != nil {
			return driver.Hold{}, mapErr(ctx, err)
		}
		me := entry(q, l)
		var resp *clientv3.TxnResponse
		tctx, done := d.txnContext(ctx, l)
		err = onLeader(tctx, func(ctx context.Context) (err error) {
			resp, err = d.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(q), "=", 0).WithPrefix()).
				Then(clientv3.OpPut(me, entryValue(req), clientv3.WithLease(l.id))).
				Else(clientv3.OpGet(me, clientv3.WithKeysOnly())).
				Commit()
			return err
		})
		done()
		if err == nil && resp.Succeeded && ctx.Err() != nil {
			// The caller gave up while the put went through: take it back.
			d.dropEntry(ctx, l, me, resp.Header.Revision)
			return driver.Hold{}, ctx.Err()
		}
		if err == nil && !resp.Succeeded && !retried && d.dropOrphan(ctx, l, me, resp) {
			d.leases.put(l)
			continue
		}
		if leaseGone(err) {
			d.leases.dead(l)
			if !retried {
				if l.shared {
					d.leases.put(l)
				}
				continue // an idle or shared lease expired or was revoked: nothing was written
			}
		}
		if err != nil {
			d.undo(ctx, l, me)
			return driver.Hold{}, mapErr(ctx, err)
		}
		d.confirmed(l, resp.Header.RaftTerm)
		if !resp.Succeeded {
			d.leases.put(l)
			return driver.Hold{}, &driver.HeldError{}
		}
		return d.granted(d.newHold(q, me, resp.Header.Revision, l), keyWatch{}), nil
	}
}

// Acquire queues for req.Key and blocks until every earlier entry of the
// queue is gone. Each waiter watches only its predecessor: no herd. When
// ctx ends while it waits, it removes its entry and returns ctx's error
// together with ErrNotAcquired (the server answered; the wait was longer
// than ctx).
func (d *drv) Acquire(ctx context.Context, req driver.Request) (_ driver.Hold, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return driver.Hold{}, err
	}
	defer leave(&err)
	requeued := 0
	for {
		turn, err := d.ops.Enter(ctx, nil)
		if err != nil {
			return driver.Hold{}, err
		}
		h, pred, err := d.enqueue(ctx, req)
		turn.Leave()
		if err != nil {
			return driver.Hold{}, err
		}
		if pred.key == "" {
			return d.granted(h, keyWatch{}), nil
		}
		own, err := d.wait(ctx, h, pred)
		if err == nil {
			err = d.refresh(ctx, h)
		}
		if err != nil && errors.Is(err, errRetired) && ctx.Err() == nil {
			// The leader changed again while h's entry was moved to a
			// lease of the new term (rehome). Queue again on a lease
			// of the newest term rather than be granted a hold that
			// must run out.
			d.abandon(ctx, h, err)
			continue
		}
		if err != nil && errors.Is(err, driver.ErrLockLost) && ranOut(h.lease()) && ctx.Err() == nil && !d.isDone() {
			// h's entry was deleted before it was granted, after the
			// last keepalive sent for its lease had run out: the lease
			// expired because no keepalive got through in time (on an
			// overloaded cluster, say), not because someone revoked it
			// or deleted the entry (that still ends the wait with
			// ErrLockLost). A waiter holds nothing, so only its place
			// in line is lost: queue again, on a live lease, as a
			// ZooKeeper waiter whose node vanished does. A lease that
			// keeps running out is the store's trouble, not a lost lock.
			d.abandon(ctx, h, err)
			if requeued++; requeued < maxRequeues {
				continue
			}
			return driver.Hold{}, driver.Unavailable(fmt.Errorf("etcd: the waiter's queue entry was deleted %d times before its turn, each time after its lease had run out without a keepalive getting through", requeued))
		}
		if err != nil {
			d.abandon(ctx, h, err)
			if cerr := ctx.Err(); cerr != nil {
				// Queued behind a holder: a deadline, not an outage.
				err = fmt.Errorf("%w: %w", driver.ErrNotAcquired, cerr)
			}
			return driver.Hold{}, err
		}
		return d.granted(h, own), nil
	}
}

// incarnation is one life of a queue entry: names are reused (see entry),
// so a name and its create revision identify it.
type incarnation struct {
	key string
	rev int64
}

// enqueue adds the caller's entry to key's queue, reading in the same
// transaction the entry created last before it: its predecessor, or none
// when the queue was empty and the lock is held.
func (d *drv) enqueue(ctx context.Context, req driver.Request) (*hold, incarnation, error) {
	q := d.queue(req.Key)
	// own is a lease of this entry's own, granted when the name the shared
	// lease gives it is taken by a lapsing entry (see ReleaseAfter).
	var own *lease
	for retried := false; ; retried = true {
		l, err := own, error(nil)
		if l == nil {
			l, err = d.leases.get(ctx, req.TTL)
		}
		if err != nil {
			return nil, incarnation{}, mapErr(ctx, err)
		}
		me := entry(q, l)
		if l.shared && d.nameTaken(me) {
			// An entry of ours lapsing in place has the name: queue
			// behind it on a lease of our own.
			d.leases.put(l)
			if own, err = d.leases.grant(ctx, seconds(req.TTL)); err != nil {
				return nil, incarnation{}, mapErr(ctx, err)
			}
			continue
		}
		var resp *clientv3.TxnResponse
		tctx, done := d.txnContext(ctx, l)
		err = onLeader(tctx, func(ctx context.Context) (err error) {
			resp, err = d.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(me), "=", 0)).
				Then(clientv3.OpGet(q, append(clientv3.WithLastCreate(), clientv3.WithKeysOnly())...),
					clientv3.OpPut(me, entryValue(req), clientv3.WithLease(l.id))).
				Else(clientv3.OpGet(me, clientv3.WithKeysOnly())).
				Commit()
			return err
		})
		done()
		if err == nil && resp.Succeeded && ctx.Err() != nil {
			d.dropEntry(ctx, l, me, resp.Header.Revision)
			return nil, incarnation{}, ctx.Err()
		}
		if err == nil && !resp.Succeeded && !retried && d.dropOrphan(ctx, l, me, resp) {
			d.leases.put(l)
			continue
		}
		if err == nil && !resp.Succeeded && l.shared && lapsed(resp, l) {
			d.leases.put(l)
			if own, err = d.leases.grant(ctx, seconds(req.TTL)); err != nil {
				return nil, incarnation{}, mapErr(ctx, err)
			}
			continue
		}
		if leaseGone(err) {
			d.leases.dead(l)
			if !retried {
				if l.shared {
					d.leases.put(l)
				}
				own = nil
				continue
			}
		}
		if err != nil {
			d.undo(ctx, l, me)
			return nil, incarnation{}, mapErr(ctx, err)
		}
		d.confirmed(l, resp.Header.RaftTerm)
		if !resp.Succeeded {
			// A lease backs one entry at a time, so this cannot happen;
			// if it did, that entry is someone's: leave it and its lease.
			return nil, incarnation{}, fmt.Errorf("etcd: queue entry %q already exists", me)
		}
		h := d.newHold(q, me, resp.Header.Revision, l)
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			return h, incarnation{string(kvs[0].Key), kvs[0].CreateRevision}, nil
		}
		return h, incarnation{}, nil
	}
}

// ranOut reports whether the last keepalive sent for l (or its grant) has
// run out: the server may then have expired l on its own.
func ranOut(l *lease) bool {
	_, ttl := l.state()
	return time.Since(l.lastSent()) >= ttl
}

// maxRequeues bounds how many times Acquire queues again after its entry
// was deleted while it waited.
const maxRequeues = 4

// errQueuedLost is returned when a waiter's own entry vanished while it
// waited: its lease expired (the client could not reach the cluster for a
// whole TTL) or was revoked, or someone deleted the entry.
var errQueuedLost = fmt.Errorf("etcd: queue entry deleted while waiting (lease expired or revoked): %w", driver.ErrLockLost)

// wait blocks until h's entry is the oldest of its queue.
//
// It watches only pred, the entry created just before h's. That watch
// starts at the current revision, so etcd keeps it synced and reports the
// deletion at once (a watch started at an older revision is caught up only
// every 100ms), and the queue is then read again, so that a deletion before
// the watch existed is not missed. The read is skipped when the watch
// started at the very revision of the enqueue: nothing changed in between.
// Every grant follows a read that saw h's entry and no earlier one.
//
// Meanwhile wait keeps h's lease alive and, once the wait has lasted
// lazyWatch, watches h's own entry; the returned watch becomes the hold's
// loss watch.
func (d *drv) wait(ctx context.Context, h *hold, pred incarnation) (own keyWatch, err error) {
	var pw *predWatch // on pred
	dropPred := func(broken bool) {
		if pw != nil {
			d.releasePredWatch(pw, broken)
			pw = nil
		}
	}
	defer func() {
		dropPred(false)
		if err != nil {
			own.stop()
		}
	}()
	ka := time.NewTimer(keepAliveDelay(h.lease()))
	defer ka.Stop()
	lazy := time.NewTimer(lazyWatch) // most waits are short: watch h later
	defer lazy.Stop()
	watchOwn := false
	ownFrom := h.rev + 1 // the own watch starts here: h's entry existed before
	fresh := true        // the enqueue's read is all the watch may have missed
	predGone := false    // pred was deleted: read before watching anything
	var at int64         // a revision the watches cover everything after
	var lastRead int64   // the revision of the last queue read
	for {
		read := true
		if pw == nil && !predGone {
			if pw, err = d.predWatch(ctx, pred.key); err != nil {
				return own, err
			}
			at = pw.covered()
			// The member serving the watch may not have applied the
			// enqueue yet: reading at h.rev then would not find h.
			read = !fresh || at > h.rev
			// Never read older than a read already made: the watch
			// covers everything after at, and a newer state is as good.
			at = max(at, h.rev, lastRead)
		}
		fresh = false
		if read {
			alive, before, rev, err := d.readQueue(ctx, h, at)
			if err != nil {
				return own, mapErr(ctx, err)
			}
			if !alive {
				return own, errQueuedLost
			}
			ownFrom, lastRead = rev+1, rev
			if before.key == "" {
				return own, nil
			}
			if before != pred || pw == nil {
				dropPred(false)
				pred, predGone = before, false
				continue
			}
		}
		if own.ch == nil && watchOwn {
			own = d.watchDelete(h.ctx, h.key, clientv3.WithRev(ownFrom))
		}
	waiting:
		for {
			select {
			case wr, ok := <-pw.ch:
				pw.received(wr)
				if !ok || wr.Err() != nil {
					dropPred(true) // broken: watch again, then read
					at = 0
					break waiting
				}
				if deletedAfter(wr, pred.rev) {
					dropPred(false)
					predGone, at = true, max(wr.Header.Revision, h.rev)
					break waiting
				}
			case wr, ok := <-own.ch:
				if ok && wr.Err() == nil {
					if deletedAfter(wr, h.rev) {
						return own, errQueuedLost
					}
					continue
				}
				if d.isDone() {
					return own, driver.ErrClosed
				}
				own.stop() // broken: read, then watch from the read
				at = 0
				break waiting
			case <-lazy.C:
				watchOwn = true
				own = d.watchDelete(h.ctx, h.key, clientv3.WithRev(ownFrom))
			case <-ka.C:
				kctx, cancel := context.WithTimeout(ctx, max(driver.RenewInterval(h.ttl()), time.Second))
				err := d.keepWaiterAlive(kctx, h.lease())
				cancel()
				if err == nil && h.lease().isRetired() {
					err = driver.Unavailable(errRetired)
				}
				switch {
				case err == nil:
					ka.Reset(keepAliveDelay(h.lease()))
				case leaseGone(err):
					return own, errQueuedLost
				case errors.Is(err, errRetired):
					// The leader changed: move the entry, keeping
					// its place, onto a lease of the new term.
					if err := d.rehome(ctx, h, time.Now()); err != nil {
						return own, err
					}
					ka.Reset(keepAliveDelay(h.lease()))
				case ctx.Err() != nil:
					return own, ctx.Err()
				default: // transient: the own-entry watch tells if it expires
					ka.Reset(max(driver.RetryInterval(h.ttl()), 50*time.Millisecond))
				}
			case <-ctx.Done():
				return own, ctx.Err()
			case <-d.closed:
				return own, driver.ErrClosed
			}
		}
	}
}

// keepWaiterAlive keeps a waiting entry's lease l alive once. A shared
// lease is kept alive in its renewal turn, by a keepalive round confirmed
// by a linearizable read (leasePool.refresh), shared with the renewal
// batches and acquires that want one at the same time: a keepalive
// recorded outside the turn could be confirmed by the read of a round it
// did not belong to, asked for before it was answered, and a deposed
// leader may have answered it (see lease.turn). A lease of its own backs
// this waiter alone: its keepalive is confirmed by the waiter's next
// linearizable read of the queue, or by refresh before the grant.
func (d *drv) keepWaiterAlive(ctx context.Context, l *lease) error {
	// Each attempt bounded: one sent to a member that stopped answering
	// (a paused leader) must not take the whole interval.
	if l.shared {
		return retry(ctx, func(ctx context.Context) error {
			_, err := d.leases.refresh(ctx, l, time.Now())
			return err
		})
	}
	return retry(ctx, func(ctx context.Context) error { return d.leases.keepAlive(ctx, l) })
}

// readQueue reads the two last entries created up to h's, newest first:
// h's own (alive reports whether it is still there) and its predecessor
// (zero when h is at the head of the queue). It returns the revision it
// read at. With at > 0 it reads the state at revision at, from whichever
// member answers and without a round of consensus (serializable): that is
// enough because the watches cover every change after at. When the member
// has not applied at yet, or has compacted it, or does not answer within
// attemptTimeout, the latest state is read instead (linearizable).
func (d *drv) readQueue(ctx context.Context, h *hold, at int64) (alive bool, pred incarnation, rev int64, err error) {
	opts := []clientv3.OpOption{
		clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(h.rev),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2),
	}
	var resp *clientv3.GetResponse
	if at > 0 {
		// Bounded like an attempt of retry: a member that stopped
		// answering (a paused leader) would hold it, and meanwhile the
		// waiter's lease is not kept alive.
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		resp, err = d.cli.Get(actx, h.queue, append(opts, clientv3.WithRev(at), clientv3.WithSerializable())...)
		cancel()
		rev = at
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return false, incarnation{}, 0, err
		case errors.Is(err, rpctypes.ErrFutureRev), errors.Is(err, rpctypes.ErrCompacted),
			errors.Is(mapErr(ctx, err), driver.ErrUnavailable):
			resp = nil
		default:
			return false, incarnation{}, 0, err
		}
	}
	if resp == nil {
		err = retry(ctx, func(ctx context.Context) (err error) {
			resp, err = d.cli.Get(ctx, h.queue, opts...)
			return err
		})
		if err != nil {
			return false, incarnation{}, 0, err
		}
		rev = resp.Header.Revision
		d.confirmed(h.lease(), resp.Header.RaftTerm)
	}
	kvs := resp.Kvs
	if len(kvs) == 0 || string(kvs[0].Key) != h.key || kvs[0].CreateRevision != h.rev {
		return false, incarnation{}, rev, nil
	}
	if len(kvs) > 1 {
		pred = incarnation{string(kvs[1].Key), kvs[1].CreateRevision}
	}
	return true, pred, rev, nil
}

// refresh keeps h's lease alive before a grant when its keepalives have
// been failing (a leader election): the hold's validity window starts at
// the last extension, and without this it could be over before it began.
// etcd's new leader extends every lease, so the lease is usually still
// there.
//
// A waiter whose lease was retired (see lease.retired) moves its entry
// onto a lease of the new term first (rehome): a hold on the old one
// would have to run out.
func (d *drv) refresh(ctx context.Context, h *hold) error {
	start := time.Now()
	if h.lease().isRetired() {
		return mapErr(ctx, d.rehome(ctx, h, start))
	}
	since, ttl := h.lease().state()
	if time.Since(since) < ttl/2 {
		return nil
	}
	err := retry(ctx, func(ctx context.Context) error { return d.keepAliveConfirmed(ctx, h) })
	if errors.Is(err, errRetired) {
		err = d.rehome(ctx, h, start)
	}
	if leaseGone(err) {
		return errQueuedLost
	}
	return mapErr(ctx, err)
}

// keepAliveDelay is how long until l should be kept alive:
// driver.RenewInterval after the last keepalive (confirmed or not, so that an unconfirmed
// one is not sent again at once).
func keepAliveDelay(l *lease) time.Duration {
	_, ttl := l.state()
	return max(time.Until(l.lastSent().Add(driver.RenewInterval(ttl))), 0)
}

// abandon removes a waiter's entry after its wait failed. The caller's
// context may have ended, so this uses a fresh one. The delete is guarded
// by the entry's create revision.
func (d *drv) abandon(ctx context.Context, h *hold, cause error) {
	h.cancel()
	d.forget(h)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, err := d.deleteEntry(cctx, h, time.Time{})
	switch {
	case err != nil && h.lease().shared:
		d.leases.put(h.lease())
		d.dropLater(h.key, h.rev)
	case err != nil:
		_ = d.leases.revoke(cctx, h.lease())
	case h.lease().shared || !errors.Is(cause, driver.ErrLockLost):
		d.leases.put(h.lease()) // otherwise the lease is probably gone
	}
}

// undo cleans up after an acquire transaction whose outcome is unknown: it
// may have created the entry key on lease l. Revoking a lease of its own
// deletes whatever was attached to it. A shared lease backs other holds:
// the entry is deleted only if it is on l, in one guarded delete. The
// caller still holds the key's gate, so no later incarnation of this
// Locker's entry can exist yet: an entry on l is the one the transaction
// may have created. The delete needs no answer read back (a client that
// refuses the answers, say for their size, still gets it applied). Best
// effort, with a fresh context.
func (d *drv) undo(ctx context.Context, l *lease, key string) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if !l.shared {
		_ = d.leases.revoke(cctx, l)
		return
	}
	d.leases.put(l)
	_ = retry(cctx, func(ctx context.Context) error {
		_, err := d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.LeaseValue(key), "=", l.id)).
			Then(clientv3.OpDelete(key)).
			Commit()
		return err
	})
}

// txnContext is the context of an acquire transaction on lease l. On a
// lease of its own it is ctx: a transaction whose outcome is unknown is
// undone by revoking the lease. A shared lease cannot be revoked, so the
// transaction is given a little longer than ctx (at most txnGrace after it
// ends) to answer: an answered transaction is taken back exactly if the
// caller gave up meanwhile, and few are left unknown.
func (d *drv) txnContext(ctx context.Context, l *lease) (context.Context, context.CancelFunc) {
	if !l.shared {
		return ctx, func() {}
	}
	tctx, stop := linger.After(ctx, txnGrace)
	stopClose := context.AfterFunc(d.ctx, stop)
	return tctx, func() {
		stopClose()
		stop()
	}
}

// txnGrace is how long an acquire transaction on a shared lease may run
// after the caller's context ended.
const txnGrace = 500 * time.Millisecond

// dropEntry deletes the entry key that an acquire on l created at rev
// after its caller gave up, and counts it off l.
func (d *drv) dropEntry(ctx context.Context, l *lease, key string, rev int64) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := d.deleteEntry(cctx, &hold{key: key, rev: rev}, time.Time{}); err != nil {
		d.dropLater(key, rev)
	}
	d.leases.put(l)
}

// dropOrphan deletes an entry of this Locker's shared lease l that an
// acquire transaction left behind with its outcome unknown, when a new
// acquire finds it under the name it wants (resp is that acquire's failed
// transaction, whose Else read the name), unless it is one of the
// driver's live entries (a caller of the driver itself may try a key it
// holds). It reports whether it deleted it.
func (d *drv) dropOrphan(ctx context.Context, l *lease, key string, resp *clientv3.TxnResponse) bool {
	if !l.shared || len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 || clientv3.LeaseID(kvs[0].Lease) != l.id {
		return false
	}
	if rev, ok := d.live.Load(key); ok && rev.(int64) == kvs[0].CreateRevision {
		return false // a live hold or waiter of this driver, not an orphan
	}
	deleted, err := d.deleteEntry(ctx, &hold{key: key, rev: kvs[0].CreateRevision}, time.Time{})
	return err == nil && deleted
}

// confirmed lets a consensus response confirm l's last keepalive (see
// extension). Only for a lease of its own: a shared lease is kept alive by
// other goroutines too, whose keepalive may have been answered after this
// response was asked for; its keepalives are confirmed in its renewal turn
// (lease.take) only.
func (d *drv) confirmed(l *lease, term uint64) {
	if !l.shared {
		_ = d.leases.confirm(l, term)
	}
}

// dropLater deletes the incarnation of entry key created at rev (a
// shared lease's, whose delete failed) in the background: the delete is
// guarded by rev, so it never removes a later incarnation. It retries
// until the cluster answers, for at most a minute, or until Close (which
// revokes the shared leases, deleting the entry anyway).
func (d *drv) dropLater(key string, rev int64) { d.dropAt(key, rev, time.Time{}) }

// dropAt is dropLater from the instant at on.
func (d *drv) dropAt(key string, rev int64, at time.Time) {
	d.watchers.Add(1)
	go func() {
		defer d.watchers.Done()
		select {
		case <-time.After(time.Until(at)):
		case <-d.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
		defer cancel()
		_, _ = d.deleteEntry(ctx, &hold{key: key, rev: rev}, time.Time{})
	}()
}

// isDone reports whether the driver is closing.
func (d *drv) isDone() bool {
	select {
	case <-d.closed:
		return true
	default:
		return false
	}
}

// deletedAfter reports whether wr deletes its key after revision rev: an
// earlier deletion ended an earlier incarnation of a reused name.
func deletedAfter(wr clientv3.WatchResponse, rev int64) bool {
	for _, ev := range wr.Events {
		if ev.Type == mvccpb.DELETE && ev.Kv.ModRevision > rev {
			return true
		}
	}
	return false
}
