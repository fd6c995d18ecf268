package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Do locks l, runs fn, and unlocks: a Mutex, a MultiMutex, a Semaphore
// permit, or an Election's term (a leader's work loop runs for as long as
// the term lasts).
//
// The context given to fn ends, with context.Cause equal to l.Err() (an
// error matching ErrLockLost and the kind of loss), as soon as the hold is
// lost: before its lease can expire on the server when renewals fail, at
// once when the backend reports the loss. It also reads the monotonic clock
// whenever it is asked: its Err, Done and Value (and so context.Cause)
// report the end of the hold as soon as the validity window has run out,
// even if no timer has fired yet (a process resumed from SIGSTOP or a long
// pause). Its Deadline is the hold's current Lease().Expires, or ctx's
// deadline if earlier; it moves forward when the lease is renewed. Contexts
// derived from it learn of the end when the loss is declared, which can be
// late after a pause: check the context Do gave you, or l.Lease().Valid(),
// immediately before acting. Its Value chain is ctx's.
//
// Do returns fn's error joined with any error from Unlock; if the lock was
// lost while fn ran, the result matches ErrLockLost. If fn panics, Do
// unlocks and the panic goes on with its original value (the same for
// runtime.Goexit).
//
// Unlock runs even if ctx has ended by then, with a context of its own
// bounded by the lease TTL.
func Do(ctx context.Context, l Lockable, fn func(ctx context.Context) error) (err error) {
	if l == nil || fn == nil {
		return fmt.Errorf("%w: Do needs a lock and a function", ErrInvalidOption)
	}
	if err := l.Lock(ctx); err != nil {
		return err
	}
	ttl := l.Lease().TTL
	hctx := newHoldContext(ctx, l)
	unlock := func() error {
		hctx.stop()
		uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), max(ttl, time.Second))
		defer ucancel()
		return l.Unlock(uctx)
	}
	returned := false
	defer func() {
		if !returned { // fn panicked or called runtime.Goexit
			_ = unlock()
		}
	}()
	ferr := fn(hctx)
	returned = true
	if uerr := unlock(); uerr != nil {
		return errors.Join(ferr, uerr)
	}
	return ferr
}

// holdContext is the context Do hands to fn: a cancelable context that
// also ends when the hold does, by the watchdog's signal or, when asked, by
// the monotonic clock.
type holdContext struct {
	context.Context // a WithCancelCause child of the caller's ctx
	cancel          context.CancelCauseFunc
	h               Hold
	stopWatch       chan struct{}
}

func newHoldContext(ctx context.Context, h Hold) *holdContext {
	cctx, cancel := context.WithCancelCause(ctx)
	c := &holdContext{Context: cctx, cancel: cancel, h: h, stopWatch: make(chan struct{})}
	done := h.Done()
	go func() {
		select {
		case <-done:
			c.cancel(c.cause())
		case <-c.stopWatch:
		}
	}()
	return c
}

// cause is why the hold ended (ErrLockLost when the hold cannot say).
func (c *holdContext) cause() error {
	if err := c.h.Err(); err != nil {
		return err
	}
	return ErrLockLost
}

// check ends the context if the hold has ended, looking at the clock.
func (c *holdContext) check() {
	if c.Context.Err() != nil {
		return
	}
	if !c.h.Lease().Valid() { // Lease reads the clock and declares a loss
		c.cancel(c.cause())
	}
}

// stop ends the context when fn has returned, before Unlock.
func (c *holdContext) stop() {
	close(c.stopWatch)
	c.cancel(ErrUnlocked)
}

func (c *holdContext) Err() error {
	c.check()
	return c.Context.Err()
}

func (c *holdContext) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

func (c *holdContext) Value(key any) any {
	c.check()
	return c.Context.Value(key)
}

func (c *holdContext) Deadline() (time.Time, bool) {
	d, ok := c.Context.Deadline()
	if exp := c.h.Lease().Expires; !exp.IsZero() && (!ok || exp.Before(d)) {
		return exp, true
	}
	return d, ok
}
