package etcd

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// rehome moves h's entry off its lease, retired by a leader change (see
// lease.retired), onto a lease of the current term, so that the hold or
// waiter outlives the change. The entry keeps its name and its create
// revision, so its token and its place in the queue; only the lease it is
// attached to changes, by a put guarded by the create revision. A put that
// succeeds shows the entry was there without a break, and from then on the
// new lease keeps it.
//
// The new lease is kept alive first, with a keepalive sent no earlier than
// start (the start of the renewal that asked for the move), so that it
// runs at least as long as the window the renewal reports, and as long as
// the old lease could have kept the entry: whichever lease the entry is on
// when the put's outcome is unknown, it outlives the hold's window. A hold
// that cannot be moved keeps its old lease and runs out with it.
func (d *drv) rehome(ctx context.Context, h *hold, start time.Time) error {
	h.moving.Lock() // one move at a time: a caller's Renew and the watchdog's
	defer h.moving.Unlock()
	if h.released {
		return fmt.Errorf("etcd: hold released: %w", driver.ErrNotHeld)
	}
	if h.stranded {
		return driver.Unavailable(errRetired)
	}
	old := h.lease()
	if !old.isRetired() {
		// Moved meanwhile by another renewal, which may have started
		// before this one: keep the new lease alive from now on.
		return retry(ctx, func(ctx context.Context) error { return d.keepAliveConfirmed(ctx, h) })
	}
	_, ttl := old.state()
	nl, err := d.freshLease(ctx, ttl, start)
	if err != nil {
		return err
	}
	resp, err := d.moveEntry(ctx, h, nl.id)
	if err != nil {
		// The entry may be on nl now. A shared nl would keep it for as
		// long as nl lives: it is deleted once the hold's window on the
		// old lease has ended (a waiter deletes it as it gives up), and
		// never moved again. A lease of its own is left to expire, never
		// pooled.
		h.stranded = true
		if nl.shared {
			if until := h.validUntil(); !until.IsZero() {
				d.dropAt(h.key, h.rev, until)
			}
			d.leases.put(nl)
		}
		return err
	}
	d.confirmed(nl, resp.Header.RaftTerm)
	if !resp.Succeeded {
		d.leases.put(nl)
		return fmt.Errorf("etcd: lock entry deleted: %w", driver.ErrLockLost)
	}
	if old.shared {
		old.untrack(h)
	}
	if nl.shared && d.loss.registered(h) {
		since, ttl := nl.state()
		nl.track(h, since.Add(ttl))
	}
	h.lz.Store(nl)
	d.leases.put(old)
	return nil
}

// txnKeyBytes bounds the key bytes of one write transaction, well under
// etcd's default limit on a proposal (1.5 MiB) and the client's on a
// request (2 MiB): maxTxnOps guarded puts of the longest keys
// (driver.MaxKeyLen bytes, escaped to three each) would not fit in one.
const txnKeyBytes = 512 << 10

// txnParts splits idx into runs of at most maxTxnOps holds whose keys,
// each counted times times, make at most txnKeyBytes: the holds one
// transaction can take. It returns where each run starts in idx, then
// len(idx).
func txnParts(hs []*hold, idx []int, times int) []int {
	bounds := []int{0}
	size := 0
	for k, i := range idx {
		n := times * len(hs[i].key)
		if first := bounds[len(bounds)-1]; k > first && (k-first == maxTxnOps || size+n > txnKeyBytes) {
			bounds = append(bounds, k)
			size = 0
		}
		size += n
	}
	return append(bounds, len(idx))
}

// moveShared moves the entries of the holds idx, all on the retired shared
// lease l, onto the current shared lease, as many to a transaction as one
// takes (txnParts, each key twice): each batch is one put per entry onto
// the new lease, guarded by every entry's create revision, so that it
// succeeds only if all of them are still there. It does for each batch
// what rehome does for one hold, and returns the holds it did not move:
// those it could not take (another move or a Release has them, or they
// were moved, released or stranded meanwhile) and those of a batch whose
// guard failed (an entry deleted), for rehome to move or judge one at a
// time.
func (d *drv) moveShared(ctx context.Context, l *lease, hs []*hold, idx []int, start time.Time, ttls []time.Duration, errs []error) (rest []int) {
	var taken []int
	for _, i := range idx {
		h := hs[i]
		if !h.moving.TryLock() {
			rest = append(rest, i)
			continue
		}
		if h.released || h.stranded || h.lease() != l {
			h.moving.Unlock()
			rest = append(rest, i)
			continue
		}
		taken = append(taken, i)
	}
	if len(taken) == 0 {
		return rest
	}
	_, ttl := l.state()
	parts := txnParts(hs, taken, 2)
	for p := 0; p+1 < len(parts); p++ {
		rest = append(rest, d.moveBatch(ctx, l, ttl, hs, taken[parts[p]:parts[p+1]], start, ttls, errs)...)
	}
	return rest
}

// moveBatch moves the entries of the holds batch, whose moving mutexes the
// caller holds and which it releases, in one transaction (see
// moveShared).
func (d *drv) moveBatch(ctx context.Context, old *lease, ttl time.Duration, hs []*hold, batch []int, start time.Time, ttls []time.Duration, errs []error) (rest []int) {
	defer func() {
		for _, i := range batch {
			hs[i].moving.Unlock()
		}
	}()
	nl, err := d.freshLease(ctx, ttl, start)
	if err != nil {
		for _, i := range batch {
			errs[i] = mapErr(ctx, err)
		}
		return nil
	}
	d.leases.use(nl, len(batch)-1) // one entry on it each
	cmps := make([]clientv3.Cmp, len(batch))
	puts := make([]clientv3.Op, len(batch))
	for k, i := range batch {
		cmps[k] = clientv3.Compare(clientv3.CreateRevision(hs[i].key), "=", hs[i].rev)
		puts[k] = clientv3.OpPut(hs[i].key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(nl.id))
	}
	var resp *clientv3.TxnResponse
	err = retry(ctx, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
		return err
	})
	if err != nil {
		// Each entry may be on nl now: as in rehome, each hold is
		// stranded, and its entry deleted once its window has ended.
		for _, i := range batch {
			h := hs[i]
			h.stranded = true
			if until := h.validUntil(); !until.IsZero() {
				d.dropAt(h.key, h.rev, until)
			}
			d.leases.put(nl)
			errs[i] = mapErr(ctx, err)
		}
		return nil
	}
	d.confirmed(nl, resp.Header.RaftTerm)
	if !resp.Succeeded {
		for range batch {
			d.leases.put(nl)
		}
		return batch
	}
	registered := d.loss.registered
	since, nttl := nl.state()
	for _, i := range batch {
		h := hs[i]
		old.untrack(h)
		if registered(h) {
			nl.track(h, since.Add(nttl))
		}
		h.lz.Store(nl)
		d.leases.put(old)
		ttls[i] = nttl
	}
	return nil
}

// moveEntry attaches h's entry to lease id, keeping its value, if its
// create revision is still h's (resp.Succeeded). The guard makes it safe to
// send again, so it is retried across a leader election.
func (d *drv) moveEntry(ctx context.Context, h *hold, id clientv3.LeaseID) (resp *clientv3.TxnResponse, err error) {
	err = retry(ctx, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
			Then(clientv3.OpPut(h.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(id))).
			Commit()
		return err
	})
	return resp, err
}

// freshLease returns a lease of ttl for a moved entry, kept alive by a
// keepalive sent no earlier than start: the Locker's shared lease, or a
// new lease of its own.
func (d *drv) freshLease(ctx context.Context, ttl time.Duration, start time.Time) (*lease, error) {
	if !d.leases.shared {
		return d.leases.grant(ctx, seconds(ttl))
	}
	nl, err := d.leases.getShared(ctx, ttl)
	if err != nil {
		return nil, err
	}
	if since, _ := nl.state(); since.Before(start) {
		if _, err := d.leases.refresh(ctx, nl, start); err != nil {
			d.leases.put(nl)
			return nil, err
		}
	}
	return nl, nil
}
