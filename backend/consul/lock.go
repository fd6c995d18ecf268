package consul

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// hold is the driver's state of one granted lock (driver.Hold.State).
type hold struct {
	path  string
	s     *session
	ttl   time.Duration // requested: the pool the session returns to
	token uint64        // ModifyIndex of the acquire

	// lost is marked when the hold ends other than by Release; its
	// channel is the hold's Lost, and OnLost hangs the portable layer's
	// callback on it without a goroutine.
	lost     driver.Loss
	released atomic.Bool        // Release has begun: the monitor stops
	stopMon  context.CancelFunc // ends the monitor's blocking query
}

// OnLost calls f when the hold ends other than by Release.
func (d *consulDriver) OnLost(dh driver.Hold, f func()) func() bool {
	h, _ := dh.State.(*hold)
	if h == nil {
		return driver.ForeignLost(f)
	}
	return h.lost.OnLost(f)
}

// TryAcquire takes the key with one transaction, [lock, get], so that the
// fencing token (the ModifyIndex the lock wrote) is read atomically with the
// acquire.
func (d *consulDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	path := d.path(req.Key)
	if err := d.fair.wait(ctx, path); err != nil {
		return driver.Hold{}, err
	}
	for attempt := 0; ; attempt++ {
		s, pooled := d.pool.get(req.TTL), true
		if s == nil {
			var err error
			if s, err = d.createSession(ctx, req.TTL); err != nil {
				return driver.Hold{}, err
			}
			pooled = false
		}
		h, err := d.acquire(ctx, path, req.TTL, req.Meta, s)
		if errors.Is(err, errInvalidSession) {
			if pooled && attempt == 0 {
				continue // the idle session was lost meanwhile: once more with a new one
			}
			// A session destroyed between its creation and its first use:
			// someone is destroying sessions; worth a retry later.
			return driver.Hold{}, driver.Unavailable(err)
		}
		return h, err
	}
}

var errInvalidSession = errors.New("consul: session no longer exists")

func (d *consulDriver) acquire(ctx context.Context, path string, ttl time.Duration, meta string, s *session) (driver.Hold, error) {
	ops := api.TxnOps{
		// The key's value is the holder's description, for Inspect.
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: path, Session: s.id, Value: []byte(meta)}},
		{KV: &api.KVTxnOp{Verb: api.KVGet, Key: path}},
	}
	ok, resp, _, err := d.c.Txn().Txn(ops, d.qopts(ctx))
	if err != nil {
		// Ambiguous: the lock may have been applied. Free it (only if it is
		// this session's) and end the session, in the background.
		d.abandon(path, s, 0)
		return driver.Hold{}, mapErr(ctx, "acquire", err)
	}
	if !ok {
		if invalidSession(resp) {
			return driver.Hold{}, fmt.Errorf("%w: %s", errInvalidSession, txnErrors(resp))
		}
		d.pool.put(ttl, s)
		d.fair.failed(path)
		return driver.Hold{}, d.heldError(ctx, path)
	}
	var kv *api.KVPair
	if len(resp.Results) == 2 {
		kv = resp.Results[1].KV
	}
	if kv == nil || kv.Session != s.id || kv.ModifyIndex == 0 {
		d.abandon(path, s, 0)
		return driver.Hold{}, driver.Unavailable(fmt.Errorf("consul: acquire %q: unexpected transaction result", path))
	}
	d.fair.acquired(path)
	h := &hold{path: path, s: s, ttl: ttl, token: kv.ModifyIndex}
	s.bind(h)
	d.startMonitor(h)
	return driver.Hold{Token: kv.ModifyIndex, TTL: s.ttl, Since: s.renewedAt(), Lost: h.lost.Chan(), State: h}, nil
}

// heldError says why an acquire failed. When the key is held, by whom does
// not matter; Consul does not tell how long the holder's session has left,
// so Remaining stays 0 and the wait is driven by the watch. When the key is
// free yet could not be taken, a lock-delay is in effect: the key was held
// by a session that ended without releasing it. Nothing is published when a
// lock-delay ends, so the caller retries after a backoff.
func (d *consulDriver) heldError(ctx context.Context, path string) error {
	kv, _, err := d.c.KV().Get(path, d.qopts(ctx))
	if err != nil || (kv != nil && kv.Session != "") {
		return &driver.HeldError{}
	}
	return &driver.HeldError{Remaining: d.fair.lockDelayBackoff(path, d.lockDelay)}
}

// abandon cleans up after a hold that may or may not exist (an ambiguous
// acquire, a failed release): delete the key if it is still locked by s at
// index (any index when 0), then destroy s. The key is deleted before the
// session ends so that no lock-delay is applied to it.
func (d *consulDriver) abandon(path string, s *session, index uint64) {
	d.background(func(ctx context.Context) {
		ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: path, Session: s.id}}}
		if index != 0 {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: path, Index: index}})
		} else {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: path}})
		}
		_, _, _, _ = d.c.Txn().Txn(ops, d.qopts(ctx))
		_, _ = d.c.Session().Destroy(s.id, d.wopts(ctx))
	})
}

func holdOf(h driver.Hold) (*hold, error) {
	hs, _ := h.State.(*hold)
	if hs == nil {
		return nil, fmt.Errorf("consul: foreign hold: %w", driver.ErrNotHeld)
	}
	return hs, nil
}

// Release deletes the key if it is still this hold's: locked by its session
// and unmodified since the acquire (delete-cas at the acquire's index), so
// that it never frees a later hold, even one by the same session. The
// session then goes back to the pool.
func (d *consulDriver) Release(ctx context.Context, h driver.Hold) error {
	hs, err := holdOf(h)
	if err != nil {
		return err
	}
	if hs.released.Swap(true) {
		return fmt.Errorf("consul: release %q: %w (released already)", hs.path, driver.ErrNotHeld)
	}
	// cleanup frees what the hold may still have, unless its session has
	// moved on to a later hold (a release of a hold that was released, or
	// lost, before): then the session is not this hold's to end.
	cleanup := func(abandon bool) {
		hs.stopMonitor()
		if !hs.s.unbind(hs) {
			return
		}
		if abandon {
			d.abandon(hs.path, hs.s, hs.token)
		} else {
			// The session serves this hold only, so the most it can
			// still lock is this hold's key.
			d.destroyLater(hs.s)
		}
	}
	if err := d.check(ctx); err != nil {
		cleanup(true)
		return err
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: hs.path, Session: hs.s.id}},
		{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: hs.path, Index: hs.token}},
	}
	ok, resp, _, err := d.c.Txn().Txn(ops, d.qopts(ctx))
	if err != nil {
		cleanup(true)
		return mapErr(ctx, "release", err)
	}
	if !ok {
		// The key is gone, taken over, overwritten, or a later hold's.
		cleanup(false)
		return fmt.Errorf("consul: release %q: %w (%s)", hs.path, driver.ErrNotHeld, txnErrors(resp))
	}
	if hs.s.unbind(hs) {
		d.pool.put(hs.ttl, hs.s)
	}
	return nil
}

// Renew renews the hold's session and checks that the key is still the
// hold's. It returns the TTL the server granted.
func (d *consulDriver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	hs, err := holdOf(h)
	if err != nil {
		return 0, err
	}
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	ttl, ok, err := d.renewSession(ctx, hs.s)
	if err != nil {
		return 0, err
	}
	if !ok {
		hs.lost.Mark()
		return 0, fmt.Errorf("consul: renew %q: session invalidated: %w", hs.path, driver.ErrLockLost)
	}
	kv, _, err := d.c.KV().Get(hs.path, d.qopts(ctx))
	if err != nil {
		return 0, mapErr(ctx, "renew", err)
	}
	if !hs.owns(kv) {
		hs.lost.Mark()
		return 0, fmt.Errorf("consul: renew %q: key deleted or taken over: %w", hs.path, driver.ErrLockLost)
	}
	return ttl, nil
}

// owns reports whether kv is still this hold's lock.
func (h *hold) owns(kv *api.KVPair) bool {
	return kv != nil && kv.Session == h.s.id && kv.ModifyIndex == h.token
}

func (h *hold) stopMonitor() {
	if h.stopMon != nil {
		h.stopMon()
	}
}
