package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// hold is one granted lock: its lease, its Done channel and its watchdog.
type hold struct {
	m  *mutex
	gt *gate
	dh driver.Hold

	done     chan struct{} // closed when the hold ends, by Unlock or by loss
	stop     chan struct{} // closed to stop the watchdog
	poke     chan struct{} // an explicit Renew moved the lease
	gateOnce sync.Once

	mu      sync.Mutex
	lease   Lease
	renewAt time.Time // when the watchdog renews next
	isEnded bool
	lostErr error // why the hold was lost; nil if it ended by Unlock
}

func newHold(m *mutex, gt *gate, dh driver.Hold, sent time.Time) *hold {
	h := &hold{
		m:    m,
		gt:   gt,
		dh:   dh,
		done: make(chan struct{}),
		stop: make(chan struct{}),
		poke: make(chan struct{}, 1),
	}
	h.setLease(sent, dh.TTL)
	return h
}

// setLease moves the validity window: sent + ttl - drift. Called with h.mu
// held, or before the hold is shared.
func (h *hold) setLease(sent time.Time, ttl time.Duration) {
	if ttl <= 0 {
		ttl = h.m.opts.ttl
	}
	h.lease = Lease{Token: Token(h.dh.Token), TTL: ttl, Expires: sent.Add(ttl - drift(ttl))}
	h.renewAt = sent.Add(ttl / 3)
}

// lossAt is when the watchdog declares the hold lost if no renewal has
// succeeded: a tenth of the TTL before the validity window closes, so that
// Done is closed while the lease still runs on the server.
func (h *hold) lossAt() time.Time {
	return h.lease.Expires.Add(-h.lease.TTL / 10)
}

func (h *hold) leaseNow() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

func (h *hold) ended() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.isEnded
}

func (h *hold) cause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lostErr
}

// end closes Done once. It reports whether the hold had already ended.
func (h *hold) end(lostErr error) (already bool) {
	h.mu.Lock()
	if h.isEnded {
		h.mu.Unlock()
		return true
	}
	h.isEnded = true
	h.lostErr = lostErr
	h.mu.Unlock()
	close(h.done)
	return false
}

// lose ends the hold as lost and lets local waiters at the backend.
func (h *hold) lose(err error) {
	if !h.end(err) {
		h.leaveGate()
	}
}

// finish ends the hold for Unlock and stops the watchdog. It reports whether
// the hold had been lost before.
func (h *hold) finish() (wasLost bool) {
	h.end(nil)
	close(h.stop)
	return h.cause() != nil
}

func (h *hold) leaveGate() {
	h.gateOnce.Do(func() { h.m.l.gates.leave(h.m.key, h.gt) })
}

func (h *hold) start() {
	h.m.l.wg.Add(1)
	go h.watchdog()
}

// watchdog renews the lease about every TTL/3 (when auto-renew is on), and
// ends the hold as lost when the driver reports loss, when the backend says
// the lock is no longer ours, or when no renewal has succeeded by lossAt.
func (h *hold) watchdog() {
	defer h.m.l.wg.Done()
	lost := h.dh.Lost // nil channel blocks forever: fine
	lossTimer := time.NewTimer(time.Hour)
	renewTimer := time.NewTimer(time.Hour)
	defer lossTimer.Stop()
	defer renewTimer.Stop()
	retry := time.Time{}
	for {
		h.mu.Lock()
		if h.isEnded {
			h.mu.Unlock()
			return
		}
		lossAt, renewAt, ttl := h.lossAt(), h.renewAt, h.lease.TTL
		h.mu.Unlock()
		if retry.After(renewAt) {
			renewAt = retry
		}
		lossTimer.Reset(time.Until(lossAt))
		var renewC <-chan time.Time
		if h.m.opts.autoRenew {
			renewTimer.Reset(time.Until(renewAt))
			renewC = renewTimer.C
		}
		select {
		case <-h.stop:
			return
		case <-h.poke:
			retry = time.Time{}
		case <-lost:
			h.lose(fmt.Errorf("backend reported the hold ended"))
		case <-lossTimer.C:
			h.lose(fmt.Errorf("lease validity ended without a successful renewal"))
		case <-renewC:
			err := h.renew(context.Background())
			switch {
			case err == nil:
				retry = time.Time{}
			case errors.Is(err, ErrLockLost) || errors.Is(err, ErrNotHeld):
				// renew has ended the hold already
			default:
				// Transient: try again soon, until lossAt gives up.
				retry = time.Now().Add(max(ttl/20, 10*time.Millisecond))
			}
		}
		lossTimer.Stop()
		renewTimer.Stop()
	}
}

// renew extends the lease. A renewal that comes back after lossAt does not
// revive a hold that has been declared lost.
func (h *hold) renew(ctx context.Context) error {
	h.mu.Lock()
	if h.isEnded {
		h.mu.Unlock()
		return ErrLockLost
	}
	deadline := h.lossAt()
	h.mu.Unlock()

	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	sent := time.Now()
	ttl, err := h.m.l.drv.Renew(ctx, h.dh)
	if err != nil {
		if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrLockLost) {
			h.lose(err)
			return fmt.Errorf("%w: %w", ErrLockLost, err)
		}
		return classify(ctx, err, false)
	}
	h.mu.Lock()
	if h.isEnded {
		h.mu.Unlock()
		return ErrLockLost
	}
	h.setLease(sent, ttl)
	h.mu.Unlock()
	select {
	case h.poke <- struct{}{}:
	default:
	}
	return nil
}
