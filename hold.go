package dlock

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/observe"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// hold is one granted lock: its lease, its Done channel and its place in
// the Locker's renewal scheduler.
//
// The watchdog is an entry in the scheduler's heap, not a goroutine or a
// timer: the scheduler looks at the hold at its next renewal (about every
// driver.RenewInterval, when auto-renew is on) or at lossAt, whichever comes first. Only
// drivers that report loss themselves (Hold.Lost) without implementing
// driver.LossNotifier cost a goroutine, to wait on that channel.
type hold struct {
	m  *Mutex
	gt *gate
	dh driver.Hold

	acquired time.Time // when the grant came back, for HoldEnd and the minimum and maximum hold
	maxAt    time.Time // acquired + the maximum hold (WithMaxHold); zero for none
	// stopLoss stops listening for the driver's loss signal: undoes
	// driver.LossNotifier.OnLost, or ends the Lost watcher goroutine; nil
	// when the driver reports no loss.
	stopLoss func() bool

	// Guarded by the scheduler's mutex: the index in its heap, which also
	// keeps when the hold is due; -1 when not in it.
	hi int32

	gateLeft atomic.Bool // leaveGate has run
	freeOnce sync.Once   // the key is given back on the store once (free)
	started  bool        // the hold is in the scheduler; h.mu held
	isEnded  bool        // h.mu held

	// The Mutex's, read for every renewal: kept beside mu, whose line the
	// watchdog reads anyway, rather than behind h.m (with many holds, each
	// Mutex's line is one more cache miss per hold and renewal).
	sched     *scheduler
	obs       observe.Observer
	autoRenew bool

	mu       sync.Mutex
	lease    Lease
	renewAt  time.Time // when the watchdog renews next
	lostErr  error     // why the hold was lost; nil if it ended by Unlock
	endErr   error     // why the hold ended: lostErr, ErrUnlocked or ErrClosed
	renewErr error     // the last renewal's failure, nil after a success
	fl       *flight   // the watchdog's renewal in flight; nil when none
	// done is closed when the hold ends, by Unlock or by loss; made only
	// when asked for (doneChan), as a hold that nobody waits on (an
	// uncontended Lock and Unlock) needs none. doneClosed: the hold's end
	// has been signalled, and a done asked for from then on is closedChan.
	done       chan struct{}
	doneClosed bool
}

// flight is a renewal by the watchdog, from decide to flightDone. It lives
// only while the renewal runs, so a hold at rest does not carry it.
type flight struct {
	// done is closed when the renewal returns; made (under h.mu) only
	// when an Unlock has to wait for it, so that a renewal nobody waits
	// for allocates no channel.
	done chan struct{}
	// A single renewal's context and its cancel; nil for a batched one.
	ctx    context.Context
	cancel context.CancelFunc
	// A batched renewal's RenewBatch call, set once it is made, and
	// whether this hold has stopped waiting for it.
	round   atomic.Pointer[renewRound]
	stopped atomic.Bool
}

// renewRound is one RenewBatch call: its context is cancelled once every
// hold in it has stopped waiting for it (each unlocked or lost).
type renewRound struct {
	left   atomic.Int32
	cancel context.CancelFunc
}

// stop cuts the renewal short: a single renewal is cancelled; a batched
// one is left by this hold, and cancelled when it was the last. Before
// its RenewBatch call is made there is nothing to stop.
func (fl *flight) stop() {
	if fl.cancel != nil {
		fl.cancel()
		return
	}
	if r := fl.round.Load(); r != nil && fl.stopped.CompareAndSwap(false, true) && r.left.Add(-1) == 0 {
		r.cancel()
	}
}

func newHold(m *Mutex, gt *gate, dh driver.Hold, sent time.Time) *hold {
	h := &hold{m: m, gt: gt, dh: dh, acquired: time.Now(), hi: -1,
		sched: m.l.sched, obs: m.obs, autoRenew: m.opts.autoRenew}
	if m.opts.maxHold > 0 {
		h.maxAt = h.acquired.Add(m.opts.maxHold)
	}
	h.setLease(sent, dh.TTL)
	return h
}

// setLease moves the validity window: sent + ttl - drift. Called with h.mu
// held, or before the hold is shared.
func (h *hold) setLease(sent time.Time, ttl time.Duration) {
	if ttl <= 0 {
		ttl = h.m.opts.requestTTL(h.m.l.lim)
	}
	h.lease = Lease{Token: Token(h.dh.Token), TTL: ttl, Expires: sent.Add(ttl - drift(ttl))}
	h.renewAt = h.sched.align(sent.Add(driver.RenewInterval(ttl)), ttl)
}

// lossAt is when the watchdog declares the hold lost if no renewal has
// succeeded: driver.LossMargin before the validity window closes, so that
// Done is closed while the lease still runs on the server.
func (h *hold) lossAt() time.Time {
	return h.lease.Expires.Add(-driver.LossMargin(h.lease.TTL))
}

// nextWake is when the watchdog must look again. h.mu held.
func (h *hold) nextWake() time.Time {
	at := h.lossAt()
	if h.autoRenew && h.renewAt.Before(at) {
		at = h.renewAt
	}
	if !h.maxAt.IsZero() && h.maxAt.Before(at) {
		at = h.maxAt
	}
	return at
}

func (h *hold) leaseNow() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// settled is endCause for a call that reports the end of the hold to its
// caller (Renew, Unlock): it returns once Done is closed. The call that
// ended the hold may still be telling the observers, and a caller told of
// the end must not find Done open.
func (h *hold) settled() error {
	<-h.doneChan()
	return h.endCause()
}

// endCause is why the hold ended; nil while it has not.
func (h *hold) endCause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.endErr
}

// unlocked reports whether Unlock ended the hold (it was not lost first).
func (h *hold) unlocked() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.isEnded && h.lostErr == nil
}

// setCause records that a hold that ended by Unlock had in fact been lost
// already (the release found the lock gone).
func (h *hold) setCause(err error) {
	h.mu.Lock()
	h.lostErr, h.endErr = err, err
	h.mu.Unlock()
}

// ended reports whether the hold has ended (by Unlock, Close or loss),
// first declaring it lost if its validity window has run down to the loss
// margin, whether or not the watchdog's timer has fired: timers fire late
// after a pause (SIGSTOP, a long GC, a suspended VM), the monotonic clock
// does not. Called for that alone, its result unused, it makes the hold's
// state current.
func (h *hold) ended() bool {
	h.mu.Lock()
	if h.isEnded {
		h.mu.Unlock()
		return true
	}
	if time.Now().Before(h.lossAt()) {
		h.mu.Unlock()
		return false
	}
	fl, cause := h.fl, h.expiryCause()
	h.mu.Unlock()
	if fl != nil {
		fl.stop()
	}
	h.lose(cause)
	return true
}

// expiryCause is the loss error of a hold whose validity window ran out:
// ErrRenewalFailed if renewals were tried (one may still be in flight),
// ErrLeaseExpired if none was. h.mu held.
func (h *hold) expiryCause() error {
	switch {
	case h.renewErr != nil:
		return newLoss(ErrRenewalFailed, h.renewErr)
	case h.fl != nil:
		return newLoss(ErrRenewalFailed, errors.New("the renewal in flight did not return within the validity window"))
	default:
		return newLoss(ErrLeaseExpired, fmt.Errorf("validity window of %v ended", h.lease.TTL))
	}
}

// end closes Done once and stops the watchdog. lostErr is the loss error,
// nil when the owner ends the hold; why is then the cause recorded. It
// reports whether the hold had already ended.
func (h *hold) end(lostErr, why error) (already bool) {
	h.mu.Lock()
	if h.isEnded {
		h.mu.Unlock()
		return true
	}
	h.isEnded = true
	h.lostErr = lostErr
	h.endErr = why
	if lostErr != nil {
		h.endErr = lostErr
	}
	if h.started {
		h.sched.remove(h)
	}
	if h.stopLoss != nil {
		h.stopLoss()
	}
	cause := h.endErr
	h.mu.Unlock()
	// Observers hear of the end before Done closes, so that a program woken
	// by Done finds the loss already logged and counted.
	if o := h.obs; o != nil {
		o.HoldEnd(observe.HoldEnd{
			Backend: h.m.opts.backend, Key: h.m.key, Token: h.dh.Token,
			Held: time.Since(h.acquired), Lost: lostErr != nil, Cause: cause,
		})
	}
	h.mu.Lock()
	h.doneClosed = true
	if h.done != nil {
		close(h.done)
	}
	h.mu.Unlock()
	return false
}

// doneChan returns the channel closed when the hold ends.
func (h *hold) doneChan() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done == nil {
		if h.doneClosed {
			return closedChan
		}
		h.done = make(chan struct{})
	}
	return h.done
}

// reportLost ends the hold for a loss the backend reported (err says
// how), unless the hold's own clock has already run its validity window
// down to the loss margin: the backend then tells of the expiry the
// watchdog declares (its timer or loss lane only late on a busy process),
// and the hold ends with that cause, ErrRenewalFailed or ErrLeaseExpired.
func (h *hold) reportLost(err error) {
	if h.ended() {
		return
	}
	h.lose(newLoss(ErrReportedLost, err))
}

// lose ends the hold as lost and lets local waiters at the backend.
func (h *hold) lose(err error) {
	if !h.end(err, nil) {
		h.leaveGate()
	}
}

// finish ends the hold for Unlock. A renewal the watchdog has in flight is
// cancelled and waited for, so that none reaches the backend after Unlock;
// a batched one is only left (and cancelled once every hold in it has
// left it) when the driver's renewals are owner-checked
// (driver.OwnerCheckedRenewer): it may take as long as the renewals of all
// the holds due with this one, and reaching the store after the release
// it changes nothing there. It reports whether the hold had been lost
// before.
func (h *hold) finish(why error) (wasLost bool) {
	h.end(nil, why)
	<-h.doneChan() // ended by another call, which may still be telling the observers
	h.mu.Lock()
	fl := h.fl
	var flying chan struct{}
	if fl != nil && (fl.cancel != nil || !h.m.l.ownerChecked) {
		if fl.done == nil {
			fl.done = make(chan struct{})
		}
		flying = fl.done
	}
	lost := h.lostErr != nil
	h.mu.Unlock()
	if fl != nil {
		fl.stop()
	}
	if flying != nil {
		<-flying
	}
	return lost
}

func (h *hold) leaveGate() {
	if h.gateLeft.CompareAndSwap(false, true) {
		h.m.l.gates.leave(h.m.key, h.gt)
	}
}

// start puts the hold in the scheduler, and arranges to hear of a loss the
// driver reports.
func (h *hold) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.isEnded {
		return
	}
	h.started = true
	h.sched.schedule(h, h.nextWake())
	lost := h.dh.Lost
	if lost == nil {
		return
	}
	reported := func() {
		h.reportLost(errors.New("the backend signalled the end of the hold (session expired, key deleted or taken over)"))
	}
	if ln := h.m.l.lossN; ln != nil {
		h.stopLoss = ln.OnLost(h.dh, reported)
		return
	}
	stop := make(chan struct{})
	h.stopLoss = func() bool { close(stop); return true }
	h.m.l.wg.Add(1)
	go func() {
		defer h.m.l.wg.Done()
		select {
		case <-lost:
			reported()
		case <-stop:
		}
	}()
}

// What the scheduler does with a hold that is due.
const (
	actNone  = iota // nothing now (it ended, or it is scheduled again)
	actLose         // its validity window ran down to the loss margin
	actRenew        // renew it: it is marked in flight
	actMax          // it reached its maximum hold: end and release it
)

// decide is the watchdog: it declares the hold lost at lossAt, and
// otherwise renews when renewAt has come (retrying soon after a transient
// failure). batched says the renewal will be part of a RenewBatch call,
// which joins the flight to its call itself (scheduler.renewBatch).
//
// A renewal in flight never holds the loss back: its context ends at lossAt
// (see renew and scheduler.renewBatch), and the hold is scheduled for
// lossAt while it runs, so that a renewal stuck in a driver that does not
// heed its context still cannot keep Done open past the validity window. A
// renewal that returns after that does not revive the hold (see renewed).
func (h *hold) decide(now time.Time, batched bool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.isEnded {
		return actNone
	}
	if !now.Before(h.lossAt()) {
		return actLose
	}
	if !h.maxAt.IsZero() && !now.Before(h.maxAt) {
		return actMax
	}
	if h.fl != nil {
		h.sched.schedule(h, h.flightWake())
		return actNone
	}
	if !h.autoRenew || now.Before(h.renewAt) {
		h.sched.schedule(h, h.nextWake())
		return actNone
	}
	fl := &flight{}
	if !batched {
		fl.ctx, fl.cancel = context.WithCancel(context.Background())
	}
	h.fl = fl
	h.sched.schedule(h, h.flightWake())
	return actRenew
}

// flightWake is when the watchdog must look again while a renewal is in
// flight: at lossAt, or at the maximum hold if that comes first. h.mu held.
func (h *hold) flightWake() time.Time {
	at := h.lossAt()
	if !h.maxAt.IsZero() && h.maxAt.Before(at) {
		at = h.maxAt
	}
	return at
}

// reachMax ends a hold that has reached its maximum duration
// (WithMaxHold), as the watchdog's work: it stops renewing it, ends it
// with an error matching ErrLockLost and ErrMaxHoldReached, waits for a
// renewal in flight, and gives the key back as Unlock would (the minimum
// hold, no longer than the maximum, has passed). The hold stays the
// Mutex's current one, as a lost hold does, so that Unlock reports why it
// ended.
func (h *hold) reachMax() {
	err := newLoss(ErrMaxHoldReached, fmt.Errorf("held for its maximum of %v", h.m.opts.maxHold))
	if h.end(err, nil) {
		return
	}
	h.finish(nil) // already ended: waits for a renewal in flight
	ctx, cancel := context.WithTimeout(context.Background(), closeReleaseTimeout)
	defer cancel()
	_ = h.free(ctx)
	h.leaveGate()
}

// free gives the key back on the store (Mutex.freeKey), once: when the
// watchdog has already released a hold that reached its maximum, the
// Unlock that follows makes no second call.
func (h *hold) free(ctx context.Context) error {
	var err error
	h.freeOnce.Do(func() { err = h.m.freeKey(ctx, h) })
	return err
}

// watchdogRenew is one renewal by the watchdog, marked in flight by decide.
func (h *hold) watchdogRenew() {
	h.mu.Lock()
	ctx := context.Background()
	if h.fl != nil && h.fl.ctx != nil {
		ctx = h.fl.ctx
	}
	h.mu.Unlock()
	err := h.observedRenew(ctx, true)
	h.flightDone(err, true)
}

// flightDone ends the watchdog's renewal in flight and schedules the hold
// again. ran says the renewal reached the driver and err is its outcome.
func (h *hold) flightDone(err error, ran bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fl := h.fl; fl != nil {
		fl.stop()
		if fl.done != nil {
			close(fl.done)
		}
		h.fl = nil
	}
	if ran && err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrNotHeld) {
		// Transient: try again soon, until lossAt gives up.
		h.renewAt = time.Now().Add(max(driver.RetryInterval(h.lease.TTL), 10*time.Millisecond))
	}
	if !h.isEnded {
		h.sched.schedule(h, h.nextWake())
	}
}

// observedRenew is renew between the observer's Begin and End, with the
// margin a successful renewal had left.
func (h *hold) observedRenew(ctx context.Context, watchdog bool) error {
	o := h.obs
	if o == nil {
		return h.renew(ctx)
	}
	c := h.m.call(observe.OpRenew)
	c.Watchdog = watchdog
	ctx = o.Begin(ctx, c)
	before := h.leaseNow().Expires
	err := h.renew(ctx)
	// The watchdog's renewal is cut short only by Unlock (ctx is its
	// flight's); a caller's Renew also by the end of the caller's ctx.
	r := observe.Result{Outcome: renewOutcome(err, h.unlocked() || !watchdog && callerEnded(ctx, err)), Err: err, Token: h.dh.Token, Duration: time.Since(c.Start)}
	if err == nil {
		r.Margin = time.Until(before)
		ls := h.leaseNow()
		r.TTL, r.Expires = ls.TTL, ls.Expires
	}
	o.End(ctx, c, r)
	return err
}

// renew extends the lease. A renewal that comes back after the hold was
// declared lost does not revive it.
func (h *hold) renew(ctx context.Context) error {
	if h.ended() {
		return h.settled()
	}
	h.mu.Lock()
	deadline := h.lossAt()
	h.mu.Unlock()

	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := time.Now()
	ttl, err := h.m.l.drv.Renew(ctx, h.dh)
	return h.renewed(ctx, sent, ttl, err)
}

// renewed applies the outcome of a renewal sent at sent under ctx.
func (h *hold) renewed(ctx context.Context, sent time.Time, ttl time.Duration, err error) error {
	if err != nil {
		if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLockLost) {
			h.mu.Lock()
			h.renewErr = err // the detail, should the window have run out first
			h.mu.Unlock()
			h.reportLost(err)
			return h.settled()
		}
		h.mu.Lock()
		h.renewErr = err
		h.mu.Unlock()
		return classify(ctx, err, false)
	}
	h.mu.Lock()
	if h.isEnded {
		h.mu.Unlock()
		return h.settled()
	}
	defer h.mu.Unlock()
	h.renewErr = nil
	h.setLease(sent, ttl)
	if h.started && h.fl == nil {
		h.sched.schedule(h, h.nextWake())
	}
	return nil
}
