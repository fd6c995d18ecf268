package consul

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/linger"
)

// hold is the driver's state of one granted lock (driver.Hold.State).
type hold struct {
	path  string
	s     *session
	ttl   time.Duration // requested: the pool the session returns to
	token uint64        // ModifyIndex of the acquire
	// viaLine is set when the hold was taken with a ticket: others were
	// waiting on the key (see queue.go).
	viaLine bool

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
	l := d.lineOf(path)
	if l == nil {
		if err := d.fair.wait(ctx, path); err != nil {
			return driver.Hold{}, err
		}
	}
	turn, err := d.ops.Enter(ctx, d.ctx.Done())
	if err != nil {
		return driver.Hold{}, err
	}
	defer turn.Leave()
	if l != nil {
		return d.tryQueued(ctx, l, req)
	}
	return d.tryAcquire(ctx, path, req, nil)
}

// tryAcquire makes an attempt, with the ticket t when not nil (see
// queue.go): the acquire then also deletes t, and fails with
// errTicketGone when t is no longer in line.
func (d *consulDriver) tryAcquire(ctx context.Context, path string, req driver.Request, t *ticket) (driver.Hold, error) {
	for attempt := 0; ; attempt++ {
		s, reused, err := d.sessionFor(ctx, req.TTL)
		if err != nil {
			return driver.Hold{}, err
		}
		h, err := d.acquire(ctx, path, req.TTL, req.Meta, s, t)
		if errors.Is(err, errInvalidSession) {
			if reused && attempt == 0 && t == nil {
				continue // the session was lost meanwhile: once more with a new one
			}
			// A session destroyed between its creation and its first use:
			// someone is destroying sessions; worth a retry later.
			return driver.Hold{}, driver.Unavailable(err)
		}
		return h, err
	}
}

// sessionFor returns the session a new hold of ttl goes on: the Locker's
// shared session of that TTL, or (Config.SessionPerHold) an idle one from
// the pool or a new one. reused says it may have ended since it was last
// seen alive.
func (d *consulDriver) sessionFor(ctx context.Context, ttl time.Duration) (s *session, reused bool, err error) {
	if d.shared != nil {
		s, err = d.shared.get(ctx, ttl)
		return s, true, err
	}
	if s = d.pool.get(ttl); s != nil {
		return s, true, nil
	}
	s, err = d.createSession(ctx, ttl)
	return s, false, err
}

var errInvalidSession = errors.New("consul: session no longer exists")

func (d *consulDriver) acquire(ctx context.Context, path string, ttl time.Duration, meta string, s *session, t *ticket) (driver.Hold, error) {
	// nonce marks this acquire's write (the key's Flags), so that an
	// ambiguous one is undone only if it was applied: on a shared session
	// the key's session alone does not tell this acquire from a later one.
	nonce := rand.Uint64() | 1
	// An attempt on a key this driver has just seen held is guarded by the
	// index it saw (see guardIndex): Consul checks a lock-delay when it
	// receives an acquire, and the commit only checks that the key is
	// free, so an unguarded acquire received while the key was held and
	// committed right after the holder's session ended would take the key
	// inside that session's lock-delay.
	guard := d.fair.guardIndex(path)
	for {
		ops := make(api.TxnOps, 0, 4)
		if guard != 0 {
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: path, Index: guard}})
		}
		ticketOp := -1
		if t != nil {
			// The ticket leaves the line with the acquire, waking the
			// next in line; a ticket gone refuses the attempt.
			ticketOp = len(ops)
			ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: t.key, Index: t.index}})
		}
		ops = append(ops,
			// The key's value is the holder's description, for Inspect.
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: path, Session: s.id, Value: []byte(meta), Flags: nonce}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGet, Key: path}})
		tctx, stop := txnContext(ctx)
		ok, resp, _, err := d.c.Txn().Txn(ops, d.qopts(tctx))
		stop()
		if err != nil {
			// Ambiguous: the lock may have been applied. Undo it if it
			// was, before returning: a Lock that returns an error must
			// hold nothing.
			d.undoAcquire(ctx, path, s, nonce)
			return driver.Hold{}, mapErr(ctx, "acquire", err)
		}
		if !ok {
			if invalidSession(resp) {
				if s.shared {
					d.shared.put(s)
					d.shared.gone(s)
				}
				return driver.Hold{}, fmt.Errorf("%w: %s", errInvalidSession, txnErrors(resp))
			}
			if ticketOp >= 0 && failedOp(resp, ticketOp) {
				d.giveBack(s)
				return driver.Hold{}, fmt.Errorf("%w: %s", errTicketGone, txnErrors(resp))
			}
			if guard != 0 && failedOp(resp, 0) {
				// The key changed since it was seen held. If it is free
				// now, try again unguarded: an acquire received after this
				// read sees any lock-delay the change started.
				guard = 0
				free, err := d.keyFree(ctx, path)
				if err == nil && free {
					continue
				}
				d.giveBack(s)
				d.fair.failed(path)
				return driver.Hold{}, &driver.HeldError{} // held again: the watch drives the wait
			}
			d.giveBack(s)
			d.fair.failed(path)
			return driver.Hold{}, d.heldError(ctx, path)
		}
		return d.acquired(path, ttl, s, nonce, resp)
	}
}

// keyFree reads whether path is unlocked, noting the index of a lock it
// sees (see fairness.sawHeld).
func (d *consulDriver) keyFree(ctx context.Context, path string) (bool, error) {
	kv, _, err := d.c.KV().Get(path, d.qopts(ctx))
	if err != nil {
		return false, err
	}
	if kv != nil && kv.Session != "" {
		d.fair.sawHeld(path, kv.ModifyIndex)
		return false, nil
	}
	return true, nil
}

// acquired turns a committed [lock, get] transaction (after any guard)
// into a hold.
func (d *consulDriver) acquired(path string, ttl time.Duration, s *session, nonce uint64, resp *api.TxnResponse) (driver.Hold, error) {
	var kv *api.KVPair
	if n := len(resp.Results); n >= 2 {
		kv = resp.Results[n-1].KV
	}
	if kv == nil || kv.Session != s.id || kv.ModifyIndex == 0 {
		d.abandonAcquire(path, s, nonce)
		return driver.Hold{}, driver.Unavailable(fmt.Errorf("consul: acquire %q: unexpected transaction result", path))
	}
	d.fair.acquired(path)
	h := &hold{path: path, s: s, ttl: ttl, token: kv.ModifyIndex}
	since, sttl := s.state()
	if s.shared {
		s.track(h, since.Add(sttl))
	} else {
		s.bind(h)
	}
	d.startMonitor(h)
	return driver.Hold{Token: kv.ModifyIndex, TTL: sttl, Since: since, Lost: h.lost.Chan(), State: h}, nil
}

// giveBack returns a session that backs no hold after a refused acquire:
// to the pool, or as one user fewer of a shared session.
func (d *consulDriver) giveBack(s *session) {
	if s.shared {
		d.shared.put(s)
		return
	}
	d.pool.put(s.want, s)
}

// heldError says why an acquire failed. When the key is held, by whom does
// not matter; Consul does not tell how long the holder's session has left,
// so Remaining stays 0 and the wait is driven by the watch. When the key is
// free yet could not be taken, a lock-delay is in effect: the key was held
// by a session that ended without releasing it. Nothing is published when a
// lock-delay ends, so the caller retries after a backoff.
func (d *consulDriver) heldError(ctx context.Context, path string) error {
	if free, err := d.keyFree(ctx, path); err != nil || !free {
		return &driver.HeldError{}
	}
	return &driver.HeldError{Remaining: d.fair.lockDelayBackoff(path, d.lockDelay)}
}

// abandon cleans up after a hold on a session of its own that may or may
// not exist (a failed release): delete the key if it is still locked by s
// at index, then destroy s. The key is deleted before the session ends so
// that no lock-delay is applied to it.
func (d *consulDriver) abandon(path string, s *session, index uint64) {
	d.background(func(ctx context.Context) {
		_, _, _, _ = d.c.Txn().Txn(dropOps(path, s.id, index), d.qopts(ctx))
		_, _ = d.c.Session().Destroy(s.id, d.wopts(ctx))
	})
}

// txnContext is the context of an acquire transaction: a caller that
// gives up while it is on its way still gets its reply, for up to
// acquireGrace after a cancellation (never past ctx's deadline), so that
// a grant that arrives as the caller gives up is handed out rather than
// left with its outcome unknown (etcd issue 10111).
func txnContext(ctx context.Context) (context.Context, context.CancelFunc) {
	l, stop := linger.After(ctx, acquireGrace)
	if dl, ok := ctx.Deadline(); ok {
		l, cancel := context.WithDeadline(l, dl)
		return l, func() { cancel(); stop() }
	}
	return l, stop
}

// acquireGrace is how long an acquire transaction whose caller gave up
// may still wait for its reply.
const acquireGrace = time.Second

// undoTimeout bounds undoAcquire's wait before the undo goes on in the
// background.
const undoTimeout = time.Second

// undoAcquire undoes an acquire whose outcome is not known, as
// abandonAcquire does, before it returns; when the cluster does not
// answer within undoTimeout, it goes on in the background.
func (d *consulDriver) undoAcquire(ctx context.Context, path string, s *session, nonce uint64) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	kv, _, err := d.c.KV().Get(path, d.qopts(uctx))
	if err == nil && kv != nil && kv.Session == s.id && kv.Flags == nonce {
		ok, _, _, terr := d.c.Txn().Txn(dropOps(path, s.id, kv.ModifyIndex), d.qopts(uctx))
		err = terr
		if terr == nil && !ok {
			err = errors.New("consul: undo of an acquire refused")
		}
	}
	if err != nil {
		d.abandonAcquire(path, s, nonce)
		return
	}
	if s.shared {
		d.shared.put(s)
		return
	}
	d.destroyLater(s)
}

// abandonAcquire undoes, in the background, an acquire whose outcome is
// not known: if the key is locked by s with the acquire's nonce, it is
// deleted at the index read. A session of its own is then destroyed; a
// shared one counts one user fewer.
func (d *consulDriver) abandonAcquire(path string, s *session, nonce uint64) {
	d.background(func(ctx context.Context) {
		kv, _, err := d.c.KV().Get(path, d.qopts(ctx))
		if err == nil && kv != nil && kv.Session == s.id && kv.Flags == nonce {
			_, _, _, _ = d.c.Txn().Txn(dropOps(path, s.id, kv.ModifyIndex), d.qopts(ctx))
		}
		if s.shared {
			d.shared.put(s)
			return
		}
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
// that it never frees a later hold, even one by the same session. A
// session of its own then goes back to the pool; a shared one counts one
// hold fewer.
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
		if hs.s.shared {
			if !abandon {
				d.shared.untrack(hs)
				return
			}
			// The key goes before the hold stops counting: a session
			// retired with the key still locked would put a lock-delay
			// on it.
			d.background(func(ctx context.Context) {
				_, _, _, _ = d.c.Txn().Txn(dropOps(hs.path, hs.s.id, hs.token), d.qopts(ctx))
				d.shared.untrack(hs)
			})
			return
		}
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
	// When someone may stand in the key's line, this Locker's next Lock
	// of the key goes to the back of it (see queue.go): a hold that came
	// through the line says so; any other reads the line as it releases.
	ops := dropOps(hs.path, hs.s.id, hs.token)
	qp := d.queuePrefix(hs.path)
	if !hs.viaLine {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: qp}})
	}
	ok, resp, _, err := d.c.Txn().Txn(ops, d.qopts(ctx))
	if err != nil {
		cleanup(true)
		return mapErr(ctx, "release", err)
	}
	if ok && (hs.viaLine || waitersIn(resp, qp)) {
		d.fair.sawLine(hs.path)
	}
	if !ok {
		// The key is gone, taken over, overwritten, or a later hold's.
		cleanup(false)
		return fmt.Errorf("consul: release %q: %w (%s)", hs.path, driver.ErrNotHeld, txnErrors(resp))
	}
	// The delete ends the monitor's blocking query on its own (it then
	// sees released and returns); cancelling the query in flight would
	// cost its connection.
	hs.stopMonitorLater()
	if hs.s.shared {
		d.shared.untrack(hs)
	} else if hs.s.unbind(hs) {
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
	if hs.s.shared {
		ttls, errs := d.renewSharedHolds(ctx, hs.s, []*hold{hs})
		return ttls[0], errs[0]
	}
	ttl, ok, err := d.renewSession(ctx, hs.s)
	if err != nil {
		return 0, err
	}
	if !ok {
		hs.lost.Mark()
		return 0, errSessionGone(hs.path)
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

// stopMonitorLater stops the monitor after watchCloseGrace.
func (h *hold) stopMonitorLater() {
	if h.stopMon != nil {
		time.AfterFunc(watchCloseGrace, h.stopMon)
	}
}

func (h *hold) stopMonitor() {
	if h.stopMon != nil {
		h.stopMon()
	}
}

// waitersIn reports whether a transaction's results hold an entry under
// the line prefix qp.
func waitersIn(resp *api.TxnResponse, qp string) bool {
	for _, r := range resp.Results {
		if r.KV != nil && strings.HasPrefix(r.KV.Key, qp) {
			return true
		}
	}
	return false
}
