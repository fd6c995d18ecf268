package dlock

import (
	"context"
	"errors"
	"time"
)

// Do locks m, runs fn, and unlocks. The context given to fn is cancelled,
// with cause ErrLockLost, as soon as the hold is lost (before its lease can
// expire on the server), so fn can stop acting; its Value chain is ctx's.
// Do returns fn's error joined with any error from Unlock; if the lock was
// lost while fn ran, the result matches ErrLockLost.
//
// Unlock runs even if ctx has ended by then, with a context of its own
// bounded by the lease TTL.
func Do(ctx context.Context, m Mutex, fn func(ctx context.Context) error) error {
	if err := m.Lock(ctx); err != nil {
		return err
	}
	done := m.Done()
	ttl := m.Lease().TTL
	cctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	go func() {
		select {
		case <-done:
			cancel(ErrLockLost)
		case <-stop:
		}
	}()
	ferr := fn(cctx)
	close(stop)
	cancel(nil)

	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), max(ttl, time.Second))
	defer ucancel()
	uerr := m.Unlock(uctx)
	if uerr == nil {
		return ferr
	}
	return errors.Join(ferr, uerr)
}
