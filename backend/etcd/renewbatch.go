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

// maxTxnOps is the most reads put in one transaction: etcd's default
// --max-txn-ops.
const maxTxnOps = 128

// progressWait bounds the wait for the loss watch to catch up with a
// renewal's confirming read (see keepAliveShared); past it, the entries
// are read.
const progressWait = 500 * time.Millisecond

// sweepers bounds the concurrent deletes of a sweep.
const sweepers = 8

// perHoldRenewers bounds the concurrent Renew calls of RenewBatch for
// holds on leases of their own (Config.LeasePerHold).
const perHoldRenewers = 16

// RenewBatch renews holds that share a lease with one keepalive of that
// lease, confirmed (see extension) by a linearizable read, and shared by
// every batch and acquire that wants the lease kept alive at the same time
// (see leasePool.refresh). The holds' entries are not read when the loss
// watch, asked for its progress, shows that it has handled every deletion
// up to that read's revision; otherwise they are read, up to maxTxnOps per
// transaction. A renewal round of 100,000 holds on one shared lease thus
// costs a keepalive, a read and a progress request, not 100,000 of each.
// Each hold is judged as Renew judges it: its entry must still be there
// with its create revision, else it is lost (ErrLockLost); a keepalive that
// fails or cannot be confirmed fails the renewal of every hold on that
// lease (ErrUnavailable, tried again by the watchdog until the validity
// window closes; ErrLockLost when the lease is gone). Holds on leases of
// their own are renewed one by one, a few at a time.
func (d *drv) RenewBatch(ctx context.Context, dhs []driver.Hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(dhs)), make([]error, len(dhs))
	hs := make([]*hold, len(dhs))
	groups := map[*lease][]int{}
	var single []int
	for i, dh := range dhs {
		h, ok := dh.State.(*hold)
		if !ok || h == nil {
			errs[i] = fmt.Errorf("etcd: foreign hold: %w", driver.ErrNotHeld)
			continue
		}
		hs[i] = h
		if h.lease().shared {
			groups[h.lease()] = append(groups[h.lease()], i)
		} else {
			single = append(single, i)
		}
	}
	fanOut(single, perHoldRenewers, func(i int) { ttls[i], errs[i] = d.Renew(ctx, dhs[i]) })
	for l, idx := range groups {
		d.renewShared(ctx, l, hs, idx, ttls, errs)
	}
	return ttls, errs
}

// renewShared renews the holds idx, all on the shared lease l.
func (d *drv) renewShared(ctx context.Context, l *lease, hs []*hold, idx []int, ttls []time.Duration, errs []error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		for _, i := range idx {
			errs[i] = err
		}
		return
	}
	defer leave(&err)
	gone := make([]bool, len(idx))
	after := time.Now()
	err = retry(ctx, func(ctx context.Context) error { return d.keepAliveShared(ctx, l, after, hs, idx, gone) })
	if leaseGone(err) {
		d.leases.dead(l)
	}
	if errors.Is(err, errRetired) {
		d.rehomeAll(ctx, l, hs, idx, after, ttls, errs)
		return
	}
	err = mapErr(ctx, err)
	since, ttl := l.state()
	for k, i := range idx {
		switch {
		case err != nil:
			errs[i] = err
		case gone[k]:
			errs[i] = fmt.Errorf("etcd: lock entry deleted: %w", driver.ErrLockLost)
		case hs[i].lease() != l:
			// Moved meanwhile onto a lease of a later term (rehome) by
			// a renewal of its own, which reported its window.
			errs[i] = driver.Unavailable(errRetired)
		default:
			ttls[i] = ttl
			l.track(hs[i], since.Add(ttl))
		}
	}
}

// rehomeAll moves the entries of the holds idx, whose shared lease l was
// retired by a leader change, onto a lease of the current term (see
// rehome), recording each one's TTL or error. On a shared lease they move
// together, as many to a transaction as one takes (moveShared): after a
// leader change every hold of the Locker moves at its next renewal, and
// one transaction each did not finish 100,000 of them within their
// windows. The holds the batches cannot take (moved, released or stranded
// meanwhile, or in a batch whose transaction found an entry changed) move
// one at a time.
func (d *drv) rehomeAll(ctx context.Context, l *lease, hs []*hold, idx []int, start time.Time, ttls []time.Duration, errs []error) {
	if d.leases.shared {
		idx = d.moveShared(ctx, l, hs, idx, start, ttls, errs)
	}
	fanOut(idx, perHoldRenewers, func(i int) {
		if err := d.rehome(ctx, hs[i], start); err != nil {
			errs[i] = mapErr(ctx, err)
			return
		}
		ttls[i] = hs[i].ttl()
	})
}

// fanOut runs fn(i) for each i of idx, at most n at a time, and returns
// once every call has.
func fanOut(idx []int, n int, fn func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, i := range idx {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	wg.Wait()
}

// sweep deletes the entries of the holds on the shared lease l whose own
// validity has ended (see lease.expired) before l is kept alive again: the
// keepalive that serves the other holds must not keep them too. Each
// delete is guarded by the entry's create revision; the loss watch then
// reports the hold lost, as the expiry of a lease of its own would. The
// deletes run in the background, a few at a time: after a stall, many
// holds may have run out together.
func (d *drv) sweep(l *lease) {
	expired := l.expired(time.Now())
	if len(expired) == 0 {
		return
	}
	d.watchers.Add(1)
	go func() {
		defer d.watchers.Done()
		ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		sem := make(chan struct{}, sweepers)
		for _, h := range expired {
			if h.lease() != l {
				continue // moved onto a lease of a later term (rehome)
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				_, _ = d.deleteEntry(ctx, &hold{key: h.key, rev: h.rev}, time.Time{})
				// An entry lapsing in place is no longer ours once its
				// time is over, deleted or not: left by a failed
				// delete, it is an orphan the next acquire removes.
				d.forget(h)
			}()
		}
		wg.Wait()
	}()
}

// keepAliveShared is keepAliveConfirmed for many holds on one lease: a
// keepalive sent no earlier than after and the read that confirms it,
// shared with every other renewal and acquire that wants one at the same
// time (see leasePool.refresh). Up to maxTxnOps holds are then judged by
// one read of their entries; more, by the loss watch once it has caught up
// with the confirming read, or else by reads of their entries, maxTxnOps
// per transaction, which run together. A read of maxTxnOps of the longest
// keys (about 1.6 MB) goes under the client's 2 MiB limit, and a read is
// not held to etcd's 1.5 MiB limit on proposals (TestLongestKeysRenew).
// gone[k] is set for the holds whose entry is gone.
func (d *drv) keepAliveShared(ctx context.Context, l *lease, after time.Time, hs []*hold, idx []int, gone []bool) error {
	rev, err := d.leases.refresh(ctx, l, after)
	if err != nil {
		return err
	}
	if len(idx) <= maxTxnOps {
		// One read does: no need to wait for the loss watch.
		return d.readEntries(ctx, hs, idx, gone)
	}
	// No hold needs a read when the loss watch has handled every deletion
	// up to the confirming read: a hold it still has was there.
	wctx, cancel := context.WithTimeout(ctx, progressWait)
	caught := d.loss.caughtUp(wctx, rev)
	cancel()
	if caught {
		for k, i := range idx {
			gone[k] = !d.loss.registered(hs[i])
		}
		return nil
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastErr error
	)
	sem := make(chan struct{}, 8)
	for start := 0; start < len(idx); start += maxTxnOps {
		part := idx[start:min(start+maxTxnOps, len(idx))]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := d.readEntries(ctx, hs, part, gone[start:]); err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lastErr
}

// readEntries reads the entries of the holds part in one transaction and
// sets gone[k] for each whose entry is not there with its create revision.
func (d *drv) readEntries(ctx context.Context, hs []*hold, part []int, gone []bool) error {
	ops := make([]clientv3.Op, len(part))
	for k, i := range part {
		ops[k] = clientv3.OpGet(hs[i].key, clientv3.WithKeysOnly())
	}
	resp, err := d.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return err
	}
	for k, i := range part {
		kvs := resp.Responses[k].GetResponseRange().Kvs
		gone[k] = len(kvs) == 0 || kvs[0].CreateRevision != hs[i].rev
	}
	return nil
}
