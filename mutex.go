package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// mutex is the portable Mutex.
type mutex struct {
	l    *locker
	key  string
	opts options

	mu sync.Mutex
	h  *hold // current hold, nil when none
}

// closedChan is returned by Done when nothing is held.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (m *mutex) Key() string { return m.key }

func (m *mutex) current() *hold {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.h
}

func (m *mutex) Token() Token {
	if h := m.current(); h != nil && !h.ended() {
		return Token(h.dh.Token)
	}
	return 0
}

func (m *mutex) Lease() Lease {
	if h := m.current(); h != nil && !h.ended() {
		return h.leaseNow()
	}
	return Lease{}
}

func (m *mutex) Done() <-chan struct{} {
	if h := m.current(); h != nil {
		return h.done
	}
	return closedChan
}

func (m *mutex) errorf(op string, err error) error {
	return fmt.Errorf("dlock: %s %q: %w", op, m.key, err)
}

// begin checks what every acquire checks first.
func (m *mutex) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.l.checkOpen(); err != nil {
		return err
	}
	h := m.current()
	if h == nil {
		return nil
	}
	if !h.ended() {
		return ErrAlreadyHeld
	}
	// The previous hold was lost and never unlocked: clean it up (the
	// release is guarded, it never frees a successor's lock) and go on.
	if err := m.release(ctx, h); err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrNotHeld) {
		return err
	}
	return nil
}

func (m *mutex) request() driver.Request {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return driver.Request{Key: m.key, TTL: m.opts.ttl, Owner: hex.EncodeToString(b[:])}
}

func (m *mutex) TryLock(ctx context.Context) error {
	if err := m.begin(ctx); err != nil {
		return m.errorf("trylock", err)
	}
	gt, ok := m.l.gates.tryEnter(m.key)
	if !ok {
		return m.errorf("trylock", fmt.Errorf("%w (by another Mutex of this Locker)", ErrNotAcquired))
	}
	sent := time.Now()
	dh, err := m.l.drv.TryAcquire(ctx, m.request())
	if err != nil {
		m.l.gates.leave(m.key, gt)
		return m.errorf("trylock", classify(ctx, err, false))
	}
	return m.held(ctx, gt, dh, sent)
}

func (m *mutex) Lock(ctx context.Context) error {
	if err := m.begin(ctx); err != nil {
		return m.errorf("lock", err)
	}
	gt, err := m.l.gates.enter(ctx, m.key, m.l.closed)
	if err != nil {
		return m.errorf("lock", err)
	}
	if m.current() != nil { // another Lock on this Mutex won meanwhile
		m.l.gates.leave(m.key, gt)
		return m.errorf("lock", ErrAlreadyHeld)
	}
	var (
		dh   driver.Hold
		sent time.Time
	)
	if m.l.acq != nil {
		sent = time.Now()
		dh, err = m.l.acq.Acquire(ctx, m.request())
		if err != nil {
			// A driver that queued the request says so with ErrNotAcquired:
			// the server answered, the wait simply outlasted ctx.
			err = classify(ctx, err, errors.Is(err, ErrNotAcquired))
		}
	} else {
		dh, sent, err = m.acquireLoop(ctx)
	}
	if err != nil {
		m.l.gates.leave(m.key, gt)
		return m.errorf("lock", err)
	}
	return m.held(ctx, gt, dh, sent)
}

// acquireLoop tries, and while the key is held waits for the backend's
// release notification or for the holder's lease to run out, whichever
// comes first. The watch is set up only after a first failed attempt (so an
// uncontended Lock costs one round trip), followed by a second attempt that
// catches a release that happened before the watch existed.
func (m *mutex) acquireLoop(ctx context.Context) (driver.Hold, time.Time, error) {
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
	for {
		sent := time.Now()
		dh, err := m.l.drv.TryAcquire(ctx, m.request())
		if err == nil {
			return dh, sent, nil
		}
		if !errors.Is(err, ErrNotAcquired) {
			return dh, sent, classify(ctx, err, answered)
		}
		answered = true
		if w == nil {
			if w, err = m.l.drv.Watch(ctx, m.key); err != nil {
				w = nil
				return dh, sent, classify(ctx, err, answered)
			}
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
		case <-timer.C:
		case <-ctx.Done():
			return dh, sent, classify(ctx, ctx.Err(), answered)
		case <-m.l.closed:
			return dh, sent, ErrClosed
		}
	}
}

// classify turns a driver error into what the caller sees. A context error
// stays in the chain; if the backend never answered during the call, the
// error also matches ErrUnavailable, since the server could not be reached
// before the deadline.
func classify(ctx context.Context, err error, answered bool) error {
	if ctx.Err() != nil {
		cerr := ctx.Err()
		if answered {
			if errors.Is(err, cerr) {
				return err
			}
			return fmt.Errorf("%w (%v)", cerr, err)
		}
		if errors.Is(err, ErrUnavailable) && errors.Is(err, cerr) {
			return err
		}
		return fmt.Errorf("%w: no answer before the context ended: %w", ErrUnavailable, cerr)
	}
	return err
}

// held records a granted hold and starts its watchdog. A grant whose
// validity window has already run down to the loss margin (a driver whose
// hold dates from a lease extension long before the grant, Hold.Since) is
// given back, never reported acquired.
func (m *mutex) held(ctx context.Context, gt *gate, dh driver.Hold, sent time.Time) error {
	if !dh.Since.IsZero() {
		sent = dh.Since
	}
	h := newHold(m, gt, dh, sent)
	var err error
	if !time.Now().Before(h.lossAt()) {
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
		return m.errorf("lock", err)
	}
	m.mu.Lock()
	m.h = h
	m.mu.Unlock()
	h.start()
	return nil
}

func (m *mutex) Unlock(ctx context.Context) error {
	if err := m.l.checkOpen(); err != nil {
		return m.errorf("unlock", err)
	}
	m.mu.Lock()
	h := m.h
	m.mu.Unlock()
	if h == nil {
		return m.errorf("unlock", ErrNotHeld)
	}
	return m.release(ctx, h)
}

// release ends h: Done closes, the watchdog stops, the backend lock is
// released (safely: only if it is still h's), and the gate opens.
func (m *mutex) release(ctx context.Context, h *hold) error {
	m.mu.Lock()
	if m.h != h { // released concurrently (Unlock racing Close)
		m.mu.Unlock()
		return m.errorf("unlock", ErrNotHeld)
	}
	m.h = nil
	m.mu.Unlock()

	wasLost := h.finish()
	err := m.l.drv.Release(ctx, h.dh)
	m.l.untrack(h)
	h.leaveGate()
	switch {
	case wasLost:
		return m.errorf("unlock", fmt.Errorf("%w: %w", ErrLockLost, h.cause()))
	case err == nil:
		return nil
	case errors.Is(err, ErrNotHeld):
		// The server no longer had it although our validity window said we
		// did: it was lost without us noticing.
		return m.errorf("unlock", fmt.Errorf("%w: %w", ErrLockLost, err))
	default:
		return m.errorf("unlock", classify(ctx, err, false))
	}
}

func (m *mutex) Renew(ctx context.Context) error {
	if err := m.l.checkOpen(); err != nil {
		return m.errorf("renew", err)
	}
	h := m.current()
	if h == nil {
		return m.errorf("renew", ErrNotHeld)
	}
	if err := h.renew(ctx); err != nil {
		return m.errorf("renew", err)
	}
	return nil
}
