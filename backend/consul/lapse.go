package consul

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Lapser = (*consulDriver)(nil)

// lapseTTL is the TTL of a lapse session that must outlast d: d rounded
// up to whole seconds, at least Consul's minimum session TTL.
func lapseTTL(d time.Duration) time.Duration {
	return max((d + time.Second - 1).Truncate(time.Second), MinTTL)
}

// ReleaseAfter lets h lapse: its key stays locked for d more, by a session
// of its own that nobody renews, and is deleted when that session ends.
// It reads the key (is it still h's?), creates the lapse session (TTL
// lapseTTL(d), behavior=delete, no lock-delay) and hands the key over in
// one transaction [check-session, check-index at h's token, unlock with
// h's session, lock with the lapse session], keeping its value (the
// description). The lapse session is not the Locker's: Close does not
// destroy it, and h's own session, shared or pooled, can end without
// freeing the key. Waiters, whose blocking queries wake on the change of
// holder and see the key still locked, wait on until Consul ends the
// session and deletes the key, which it does no sooner than the TTL and
// up to twice the TTL after (see the package documentation).
//
// If the key is no longer h's, nothing is written (a lapse session already
// made is destroyed) and the error wraps ErrNotHeld. If the hand-over
// fails, the key is left to h's session for d more: a session of its own
// is no longer renewed and ends within its TTL (at least the minimum, the
// portable layer having raised it); on a shared session the hold is
// swept, its key deleted, once d has passed (there, Close before then
// destroys the session and frees the key early).
func (d *consulDriver) ReleaseAfter(ctx context.Context, h driver.Hold, dur time.Duration) error {
	hs, err := holdOf(h)
	if err != nil {
		return err
	}
	if dur <= 0 {
		return d.Release(ctx, h)
	}
	if dur > MaxTTL {
		return fmt.Errorf("%w: consul: a lapse of %v, longer than the longest session (%v)", driver.ErrInvalidOption, dur, MaxTTL)
	}
	if hs.released.Swap(true) {
		return fmt.Errorf("consul: release %q: %w (released already)", hs.path, driver.ErrNotHeld)
	}
	hs.stopMonitor()
	until := time.Now().Add(dur)
	if err := d.check(ctx); err != nil {
		d.lapseInPlace(hs, until)
		return err
	}
	kv, _, err := d.c.KV().Get(hs.path, d.qopts(ctx))
	if err != nil {
		d.lapseInPlace(hs, until)
		return mapErr(ctx, "lapse", err)
	}
	if !hs.owns(kv) {
		d.ended(hs)
		return fmt.Errorf("consul: release %q: %w (key deleted or taken over)", hs.path, driver.ErrNotHeld)
	}
	ls, err := d.createLapseSession(ctx, lapseTTL(dur))
	if err != nil {
		d.lapseInPlace(hs, until)
		return err
	}
	ok, resp, _, err := d.c.Txn().Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: hs.path, Session: hs.s.id}},
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: hs.path, Index: hs.token}},
		{KV: &api.KVTxnOp{Verb: api.KVUnlock, Key: hs.path, Session: hs.s.id, Value: kv.Value, Flags: kv.Flags}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: hs.path, Session: ls, Value: kv.Value, Flags: kv.Flags}},
	}, d.qopts(ctx))
	if err != nil {
		// Ambiguous: the key is on either session; both last d at least.
		d.lapseInPlace(hs, until)
		return mapErr(ctx, "lapse", err)
	}
	if !ok {
		d.background(func(ctx context.Context) { _, _ = d.c.Session().Destroy(ls, d.wopts(ctx)) })
		d.ended(hs)
		return fmt.Errorf("consul: release %q: %w (%s)", hs.path, driver.ErrNotHeld, txnErrors(resp))
	}
	if hs.s.shared {
		d.shared.untrack(hs)
	} else if hs.s.unbind(hs) {
		d.pool.put(hs.ttl, hs.s)
	}
	return nil
}

// ended forgets h, whose key is no longer its own: one hold fewer on a
// shared session; a session of its own, which may still exist, is
// destroyed unless it has moved on to another hold.
func (d *consulDriver) ended(h *hold) {
	if h.s.shared {
		d.shared.untrack(h)
	} else if h.s.unbind(h) {
		d.destroyLater(h.s)
	}
}

// lapseInPlace leaves h's key to h's session until until, when it could
// not be handed to a lapse session: a session of its own stays bound to h
// and is no longer renewed; on a shared session the hold's validity is set
// to until, for the sweep to delete its key then.
func (d *consulDriver) lapseInPlace(h *hold, until time.Time) {
	if h.s.shared {
		h.s.track(h, until)
	}
}

// createLapseSession makes a session that locks one lapsing key: TTL only,
// behavior=delete, no lock-delay (its end is intended, not a holder's
// loss), never renewed. It returns its ID.
func (d *consulDriver) createLapseSession(ctx context.Context, ttl time.Duration) (string, error) {
	body := map[string]any{
		"Name":       sessionName + "-lapse",
		"TTL":        ttl.String(),
		"Behavior":   api.SessionBehaviorDelete,
		"LockDelay":  "0s",
		"NodeChecks": []string{},
	}
	var out struct{ ID string }
	if _, err := d.c.Raw().Write("/v1/session/create", body, &out, d.wopts(ctx)); err != nil {
		return "", mapErr(ctx, "create session", err)
	}
	return out.ID, nil
}
