package dlock

import (
	"errors"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// Sentinel errors, matched with errors.Is. The first five are the values
// drivers return (see package driver), so they match whatever detail a
// backend wraps around them. A caller's context.Canceled or
// context.DeadlineExceeded stays in the chain next to them.
var (
	// ErrNotAcquired: TryLock found the key held by another owner.
	ErrNotAcquired = driver.ErrNotAcquired
	// ErrNotHeld: Unlock or Renew on a Mutex that does not hold its lock.
	ErrNotHeld = driver.ErrNotHeld
	// ErrLockLost: the hold ended without Unlock (lease expired, renewal
	// failed, session expired, key deleted from outside).
	ErrLockLost = driver.ErrLockLost
	// ErrClosed: the Locker was closed.
	ErrClosed = driver.ErrClosed
	// ErrUnavailable: the backend, or a quorum of it, could not be reached.
	ErrUnavailable = driver.ErrUnavailable
	// ErrInvalidURL: a malformed URL, an unknown scheme, or an unknown or
	// malformed parameter.
	ErrInvalidURL = driver.ErrInvalidURL

	// ErrAlreadyHeld: Lock or TryLock on a Mutex that already holds its
	// lock. A dlock Mutex is not reentrant; this is reported instead of
	// deadlocking.
	ErrAlreadyHeld = errors.New("dlock: mutex already holds the lock")
	// ErrInvalidKey: an empty key, or one longer than driver.MaxKeyLen bytes.
	ErrInvalidKey = driver.ErrInvalidKey
	// ErrInvalidOption: an option out of range (a TTL <= 0, or outside the
	// backend's limits).
	ErrInvalidOption = driver.ErrInvalidOption

	// ErrUnlocked: the hold ended because its owner unlocked it (Unlock, or
	// Do returning). Mutex.Err reports it.
	ErrUnlocked = errors.New("dlock: unlocked")
)

// Why a hold was lost. An error matching ErrLockLost (from Mutex.Err,
// Unlock, Renew, or context.Cause of Do's context) also matches exactly one
// of these (ErrMaxHoldReached is an intended end rather than a failure),
// and wraps the backend's detail when there is one.
var (
	// ErrRenewalFailed: renewals were attempted and failed (the backend did
	// not answer in time, or answered with an error) until the validity
	// window had nearly run out.
	ErrRenewalFailed = driver.ErrRenewalFailed
	// ErrReportedLost: the backend said the hold had ended: the session
	// expired, the key was deleted or taken over, a renewal or release found
	// the lock no longer this hold's, while the validity window was still
	// open by the hold's own clock. Told after that, it is the expiry the
	// watchdog declares: ErrRenewalFailed or ErrLeaseExpired.
	ErrReportedLost = driver.ErrReportedLost
	// ErrLeaseExpired: the validity window ran out with no renewal
	// attempted (auto-renew off and no Renew, or a process paused past its
	// lease before the watchdog could run).
	ErrLeaseExpired = driver.ErrLeaseExpired
	// ErrMaxHoldReached: the hold reached the maximum duration given with
	// WithMaxHold; the watchdog stopped renewing it and released it. It is
	// counted apart from failures (observe.LossCause "max_hold").
	ErrMaxHoldReached = driver.ErrMaxHoldReached
)

// lossError is the error a lost hold ends with: it matches ErrLockLost,
// its kind (ErrRenewalFailed, ErrReportedLost, ErrLeaseExpired or
// ErrMaxHoldReached), and the backend's detail (its own sentinels
// included), except ErrNotHeld in that detail: a lost hold is ErrLockLost,
// never ErrNotHeld.
type lossError struct {
	kind   error
	detail error // nil when there is none
}

func (e *lossError) Error() string {
	s := ErrLockLost.Error() + " (" + strings.TrimPrefix(e.kind.Error(), "dlock: ") + ")"
	if e.detail != nil {
		s += ": " + e.detail.Error()
	}
	return s
}

func (e *lossError) Unwrap() []error {
	errs := []error{ErrLockLost, e.kind}
	switch {
	case e.detail == nil:
	case errors.Is(e.detail, ErrNotHeld):
		errs = append(errs, notHeldHidden{e.detail})
	default:
		errs = append(errs, e.detail)
	}
	return errs
}

// notHeldHidden keeps a loss's detail in the chain (a backend's own
// sentinel, such as the Redis eviction-policy error, still matches) except
// for ErrNotHeld: a lost hold never matches ErrNotHeld.
type notHeldHidden struct{ err error }

func (h notHeldHidden) Error() string { return h.err.Error() }

func (h notHeldHidden) Is(target error) bool {
	return target != ErrNotHeld && errors.Is(h.err, target)
}

func (h notHeldHidden) As(target any) bool { return errors.As(h.err, target) }

func newLoss(kind, detail error) error { return &lossError{kind: kind, detail: detail} }
