package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/observe"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Mutex is a distributed lock on one key.
//
// A Mutex is a handle for one holder. It is not reentrant: Lock on a Mutex
// that holds its lock returns ErrAlreadyHeld. Its methods are safe for
// concurrent use; concurrent Lock calls on one Mutex are served one after
// the other, and one that finds the previous hold lost (not unlocked) goes
// on to acquire rather than report ErrAlreadyHeld. Mutexes on the same key
// made from the same Locker exclude each other, as Mutexes in different
// processes do.
//
// # The rules every backend follows
//
// The conformance suite (package conformance) checks each of these on every
// backend; the portable layer, not the driver, implements them.
//
//   - Acting under the lock. Done is a notification, not a guard: after a
//     pause (SIGSTOP, a long GC, a suspended VM) timers fire late, so Done
//     may still be open for a moment after the validity window ended. The
//     check to make immediately before acting is Lease().Valid(), or the
//     Err of the context Do hands out: both read the monotonic clock when
//     called. Token, Lease, Done, Err and Do's context declare the hold lost
//     as soon as the clock says its window has run down, whether or not the
//     watchdog has run.
//   - Why a hold ended. Err returns nil while the Mutex holds its lock (or
//     never held it); afterwards ErrUnlocked, ErrClosed, or an error
//     matching ErrLockLost and exactly one of ErrRenewalFailed,
//     ErrReportedLost, ErrLeaseExpired and ErrMaxHoldReached, with the
//     backend's detail wrapped. context.Cause of Do's context is the same error.
//   - A Lock whose context ends while the key is held elsewhere returns an
//     error matching the context's error and ErrNotAcquired (the backend
//     answered that the key was held; this includes waiting behind another
//     Mutex of the same Locker). It matches ErrUnavailable instead of
//     ErrNotAcquired only when the backend never answered during the call.
//   - Unlock after the hold was lost (and perhaps taken over) returns an
//     error matching ErrLockLost and never ErrNotHeld, whether or not the
//     loss had been noticed before Unlock. ErrNotHeld means the Mutex held
//     nothing to unlock.
//   - Do unlocks when fn returns, panics or calls runtime.Goexit; a panic
//     goes on with its original value once the lock is released.
//   - Close and calls in flight: see Locker.Close.
type Mutex struct {
	l    *Locker
	key  string
	opts options
	obs  observe.Observer // nil without one: every hook is one nil check

	mu      sync.Mutex
	h       *hold // current hold, nil when none
	lastErr error // why the last hold ended, once it has been cleared
}

// closedChan is returned by Done when nothing is held.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Key returns the key given to NewMutex.
func (m *Mutex) Key() string { return m.key }

func (m *Mutex) current() *hold {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.h
}

// live returns the current hold if it has not ended, looking at the clock
// first: a hold whose validity window has run out is declared lost here,
// whether or not the watchdog's timer has fired yet.
func (m *Mutex) live() *hold {
	if h := m.current(); h != nil && !h.ended() {
		return h
	}
	return nil
}

// Token returns the fencing token of the current hold, 0 if none.
func (m *Mutex) Token() Token {
	if h := m.live(); h != nil {
		return Token(h.dh.Token)
	}
	return 0
}

// Lease returns the current hold's lease; the zero Lease if none.
func (m *Mutex) Lease() Lease {
	if h := m.live(); h != nil {
		return h.leaseNow()
	}
	return Lease{}
}

// Done returns a channel closed when the current hold ends: by Unlock,
// Close, or loss, which is signalled before the lease can expire on the
// server. With no hold it returns an already-closed channel. It is a
// notification; check Lease().Valid() before acting.
func (m *Mutex) Done() <-chan struct{} {
	if h := m.current(); h != nil {
		h.ended() // a window that ran out is a loss, timer or not
		return h.doneChan()
	}
	return closedChan
}

// Err reports why the last hold ended: nil while held or if nothing
// was ever held; ErrUnlocked after Unlock (or Do's return), also when a
// minimum hold (WithMinHold) keeps the key held a while longer; ErrClosed
// when the Locker was closed under the hold; an error matching
// ErrLockLost and one of ErrRenewalFailed, ErrReportedLost,
// ErrLeaseExpired and ErrMaxHoldReached (WithMaxHold) when it was lost.
// A new Lock resets it to nil.
func (m *Mutex) Err() error {
	m.mu.Lock()
	h, last := m.h, m.lastErr
	m.mu.Unlock()
	if h == nil {
		return last
	}
	h.ended() // a window that ran out is a loss, timer or not
	return h.endCause()
}

func (m *Mutex) errorf(op string, err error) error {
	return fmt.Errorf("dlock: %s %q: %w", op, m.key, err)
}

// settle checks the Mutex's current hold before an acquire: a live hold is
// ErrAlreadyHeld; a hold that was lost and never unlocked is cleaned up (the
// release is guarded, it never frees a successor's lock).
func (m *Mutex) settle(ctx context.Context) error {
	h := m.current()
	if h == nil {
		return nil
	}
	if !h.ended() {
		return ErrAlreadyHeld
	}
	if err := m.release(ctx, h, nil); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrNotHeld) {
		return err
	}
	return nil
}

// begin checks what every acquire checks first.
func (m *Mutex) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.settle(ctx)
}

// finishCall maps the outcome of a call whose context cctx was derived by
// locker.enter: a call cut short by Close reports ErrClosed.
func (m *Mutex) finishCall(op string, cctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if closedDuring(cctx) {
		return m.errorf(op, ErrClosed)
	}
	return m.errorf(op, err)
}

func (m *Mutex) request() driver.Request {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return driver.Request{Key: m.key, TTL: m.opts.requestTTL(m.l.lim), Owner: hex.EncodeToString(b[:]), Meta: m.opts.meta, MinHold: m.opts.minHold}
}

// TryLock makes one attempt. It returns ErrNotAcquired when the key is
// held by another owner.
func (m *Mutex) TryLock(ctx context.Context) error {
	if m.obs != nil {
		return m.observeAcquire(ctx, observe.OpTryLock, m.tryLockCall)
	}
	return m.tryLockCall(ctx, nil)
}

func (m *Mutex) tryLockCall(ctx context.Context, _ *observe.Call) error {
	ctx, exit, err := m.l.enter(ctx, false)
	if err != nil {
		return m.errorf("trylock", err)
	}
	defer exit.done()
	return m.finishCall("trylock", ctx, m.tryLock(ctx))
}

func (m *Mutex) tryLock(ctx context.Context) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	gt, ok := m.l.gates.tryEnter(m.key)
	if !ok {
		return fmt.Errorf("%w (by another Mutex of this Locker)", ErrNotAcquired)
	}
	sent := time.Now()
	dh, err := m.l.drv.TryAcquire(ctx, m.request())
	if err != nil {
		m.l.gates.leave(m.key, gt)
		return classify(ctx, err, false)
	}
	return m.held(ctx, gt, dh, sent)
}

// Lock blocks until the lock is held or ctx ends. Waiting is driven by
// the backend's notifications, never by polling on a fixed interval.
// When ctx ends first, Lock leaves nothing behind on the server and
// returns an error matching ctx.Err() and ErrNotAcquired, or, if the
// backend never answered, ctx.Err() and ErrUnavailable.
func (m *Mutex) Lock(ctx context.Context) error {
	if m.obs != nil {
		return m.observeAcquire(ctx, observe.OpLock, m.lockCall)
	}
	return m.lockCall(ctx, nil)
}

func (m *Mutex) lockCall(ctx context.Context, c *observe.Call) error {
	ctx, exit, err := m.l.enter(ctx, false)
	if err != nil {
		return m.errorf("lock", err)
	}
	defer exit.done()
	return m.finishCall("lock", ctx, m.lock(ctx, c))
}

// observeAcquire runs a Lock or TryLock call between the observer's Begin
// and End.
func (m *Mutex) observeAcquire(ctx context.Context, op observe.Op, call func(context.Context, *observe.Call) error) error {
	c := m.call(op)
	ctx = m.obs.Begin(ctx, c)
	err := call(ctx, &c)
	r := observe.Result{Outcome: lockOutcome(ctx, err), Err: err, Duration: time.Since(c.Start)}
	if err == nil {
		if h := m.current(); h != nil {
			ls := h.leaseNow()
			r.TTL, r.Expires = ls.TTL, ls.Expires
			r.Token = uint64(ls.Token)
		}
	}
	m.obs.End(ctx, c, r)
	return err
}

func (m *Mutex) call(op observe.Op) observe.Call {
	return observe.Call{Op: op, Backend: m.opts.backend, Key: m.key, Start: time.Now()}
}

// step reports a step of the wait; c is nil without an observer.
func (m *Mutex) step(ctx context.Context, c *observe.Call, s observe.Step) {
	if c != nil {
		m.obs.Step(ctx, *c, s)
	}
}

func (m *Mutex) lock(ctx context.Context, c *observe.Call) error {
	if err := m.begin(ctx); err != nil {
		return err
	}
	gt, err := m.l.gates.enter(ctx, m.key, m.l.closed)
	if err != nil {
		if ctx.Err() != nil {
			// Another Mutex of this Locker held the key all along.
			return fmt.Errorf("%w: %w (held by another Mutex of this Locker)", ErrNotAcquired, ctx.Err())
		}
		return err
	}
	// Another Lock on this Mutex may have won meanwhile, and its hold may
	// since have been lost.
	if err := m.settle(ctx); err != nil {
		m.l.gates.leave(m.key, gt)
		return err
	}
	var (
		dh   driver.Hold
		sent time.Time
	)
	if m.l.acq != nil {
		m.step(ctx, c, observe.StepQueued)
		sent = time.Now()
		dh, err = m.l.acq.Acquire(ctx, m.request())
		if err != nil {
			// A driver that queued the request says so with ErrNotAcquired:
			// the server answered, the wait simply outlasted ctx.
			err = classify(ctx, err, errors.Is(err, ErrNotAcquired))
		}
	} else {
		dh, sent, err = m.acquireLoop(ctx, c)
	}
	if err != nil {
		m.l.gates.leave(m.key, gt)
		return err
	}
	return m.held(ctx, gt, dh, sent)
}

// acquireLoop tries, and while the key is held waits for the backend's
// release notification or for the holder's lease to run out, whichever
// comes first. The watch is set up only after a first failed attempt (so an
// uncontended Lock costs one round trip), followed by a second attempt that
// catches a release that happened before the watch existed; with a driver's
// wake queue (driver.LockWatcher), before the first attempt instead.
func (m *Mutex) acquireLoop(ctx context.Context, c *observe.Call) (driver.Hold, time.Time, error) {
	var (
		w        driver.Watch
		answered bool // the backend has answered at least once
		timer    *time.Timer
	)
	defer func() {
		if w != nil {
			_ = w.Close()
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	// A driver with a wake queue is watched before the first attempt, so
	// that a refused attempt already stands in line and no second attempt
	// is needed to catch a release (its watch costs no round trip once the
	// Locker has made one).
	lw, queued := m.l.drv.(driver.LockWatcher)
	if queued {
		var err error
		if w, err = lw.WatchLock(ctx, m.key); err != nil {
			w = nil
			return driver.Hold{}, time.Now(), classify(ctx, err, false)
		}
	}
	for first := true; ; first = false {
		sent := time.Now()
		dh, err := m.l.drv.TryAcquire(ctx, m.request())
		if err == nil {
			return dh, sent, nil
		}
		if !errors.Is(err, ErrNotAcquired) {
			return dh, sent, classify(ctx, err, answered)
		}
		answered = true
		if first && w != nil {
			m.step(ctx, c, observe.StepWatch)
		}
		if w == nil {
			if w, err = m.watchLock(ctx); err != nil {
				w = nil
				return dh, sent, classify(ctx, err, answered)
			}
			m.step(ctx, c, observe.StepWatch)
			continue // try again now that no release can be missed
		}
		wait := m.opts.ttl
		var held *driver.HeldError
		if errors.As(err, &held) && held.Remaining > 0 {
			// Wake when the holder's lease runs out (expiry publishes
			// nothing); a millisecond later, so the server has expired it.
			wait = held.Remaining + time.Millisecond
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case _, ok := <-w.Changed():
			if !ok { // the watch broke: set up a new one
				_ = w.Close()
				w = nil
			}
			m.step(ctx, c, observe.StepWoken)
		case <-timer.C:
			m.step(ctx, c, observe.StepRetry)
		case <-ctx.Done():
			return dh, sent, classify(ctx, ctx.Err(), answered)
		case <-m.l.closed:
			return dh, sent, ErrClosed
		}
	}
}

// watchLock watches the key for this Lock: with the driver's wake queue
// when it has one (driver.LockWatcher), else with Watch.
func (m *Mutex) watchLock(ctx context.Context) (driver.Watch, error) {
	if lw, ok := m.l.drv.(driver.LockWatcher); ok {
		return lw.WatchLock(ctx, m.key)
	}
	return m.l.drv.Watch(ctx, m.key)
}

// classify turns a driver error into what the caller sees. When ctx has
// ended, the error matches ctx.Err(), and also ErrNotAcquired if the backend
// answered during the call that the key was held (the wait outlasted ctx),
// or ErrUnavailable if it never answered. It never matches both.
func classify(ctx context.Context, err error, answered bool) error {
	if ctx.Err() == nil {
		return err
	}
	cerr := ctx.Err()
	if answered {
		if errors.Is(err, cerr) && errors.Is(err, ErrNotAcquired) && !errors.Is(err, ErrUnavailable) {
			return err
		}
		if errors.Is(err, cerr) {
			return fmt.Errorf("%w: %w", ErrNotAcquired, cerr)
		}
		return fmt.Errorf("%w: %w (%v)", ErrNotAcquired, cerr, err)
	}
	if errors.Is(err, ErrUnavailable) && errors.Is(err, cerr) {
		return err
	}
	return fmt.Errorf("%w: no answer before the context ended: %w", ErrUnavailable, cerr)
}

// held records a granted hold and starts its watchdog. A grant whose
// validity window has already run down to the loss margin (a driver whose
// hold dates from a lease extension long before the grant, Hold.Since) is
// given back, never reported acquired; so is a grant that arrives after
// Close began.
func (m *Mutex) held(ctx context.Context, gt *gate, dh driver.Hold, sent time.Time) error {
	if !dh.Since.IsZero() {
		sent = dh.Since
	}
	h := newHold(m, gt, dh, sent)
	var err error
	if !h.acquired.Before(h.lossAt()) { // acquired is now
		err = fmt.Errorf("%w: the lock was granted after its validity window had ended (lease last extended %v ago, TTL %v)",
			ErrUnavailable, time.Since(sent).Round(time.Millisecond), h.lease.TTL)
	} else {
		err = m.l.track(h)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
		defer cancel()
		_ = m.l.drv.Release(rctx, dh)
		m.l.gates.leave(m.key, gt)
		return err
	}
	h.start()
	return nil
}

// Unlock releases the lock. It returns ErrNotHeld when this Mutex does
// not hold it, and ErrLockLost (after trying to release anyway, safely)
// when the hold was lost before Unlock. The release does not stop when
// ctx ends: a deferred Unlock(r.Context()) whose client went away still
// gives the key back, with up to 5 s more after ctx ended, rather than
// leaving it held on the server for a whole lease.
func (m *Mutex) Unlock(ctx context.Context) error {
	if m.obs == nil {
		return m.unlock(ctx)
	}
	c := m.call(observe.OpUnlock)
	ctx = m.obs.Begin(ctx, c)
	var tok uint64
	if h := m.current(); h != nil {
		tok = h.dh.Token
	}
	err := m.unlock(ctx)
	m.obs.End(ctx, c, observe.Result{Outcome: unlockOutcome(err), Err: err, Token: tok, Duration: time.Since(c.Start)})
	return err
}

func (m *Mutex) unlock(ctx context.Context) error {
	ctx, exit, err := m.l.enterRelease(ctx)
	if err != nil {
		return m.errorf("unlock", err)
	}
	defer exit.done()
	h := m.current()
	if h == nil {
		return m.errorf("unlock", ErrNotHeld)
	}
	h.ended() // a window that ran out while no timer fired is a loss too
	return m.finishCall("unlock", ctx, m.release(ctx, h, ErrUnlocked))
}

// release ends h: Done closes, the watchdog stops, the backend lock is
// released (safely: only if it is still h's), and the gate opens. why is
// the cause recorded for a hold that had not ended yet (ErrUnlocked,
// ErrClosed); nil when cleaning up a hold known to be lost.
func (m *Mutex) release(ctx context.Context, h *hold, why error) error {
	m.mu.Lock()
	if m.h != h { // released concurrently (Unlock racing Close)
		m.mu.Unlock()
		return ErrNotHeld
	}
	m.h = nil
	m.mu.Unlock()

	if why == nil {
		why = ErrUnlocked
	}
	wasLost := h.finish(why)
	err := h.free(ctx)
	m.l.untrack(h)
	h.leaveGate()
	switch {
	case wasLost:
		err = h.endCause()
	case err == nil:
	case errors.Is(err, ErrNotHeld):
		// The server no longer had it although our validity window said we
		// did: it was lost without us noticing.
		err = newLoss(ErrReportedLost, err)
		h.setCause(err)
	default:
		err = classify(ctx, err, false)
	}
	m.mu.Lock()
	m.lastErr = h.endCause()
	m.mu.Unlock()
	return err
}

// freeKey gives h's key back on the store: at once, or, with a minimum
// hold (WithMinHold) that has not passed since the grant came back, when
// it has (driver.Lapser). Both are owner-checked: a key no longer h's is
// left alone. Call it through hold.free, which calls it once.
func (m *Mutex) freeKey(ctx context.Context, h *hold) error {
	if m.opts.minHold > 0 && m.l.lapser != nil {
		if left := m.opts.minHold - time.Since(h.acquired); left > 0 {
			return m.l.lapser.ReleaseAfter(ctx, h.dh, left)
		}
	}
	return m.l.drv.Release(ctx, h.dh)
}

// Renew extends the lease to a full TTL from now. It returns ErrNotHeld
// when nothing is held and ErrLockLost when the hold was lost.
func (m *Mutex) Renew(ctx context.Context) error {
	ctx, exit, err := m.l.enter(ctx, false)
	if err != nil {
		return m.errorf("renew", err)
	}
	defer exit.done()
	h := m.current()
	if h == nil {
		return m.errorf("renew", ErrNotHeld)
	}
	return m.finishCall("renew", ctx, h.observedRenew(ctx, false))
}
