package driver

import (
	"errors"
	"fmt"
	"time"
)

// The outcomes a driver reports. The dlock package re-exports these values.
var (
	// ErrNotAcquired: the key is held by someone else.
	ErrNotAcquired = errors.New("dlock: lock not acquired: held by another owner")
	// ErrNotHeld: the caller does not hold the lock (never did, released it,
	// or it expired and nobody knew it was lost yet).
	ErrNotHeld = errors.New("dlock: lock not held")
	// ErrLockLost: a hold ended without its owner releasing it.
	ErrLockLost = errors.New("dlock: lock lost")
	// ErrClosed: the Locker was closed.
	ErrClosed = errors.New("dlock: locker closed")
	// ErrUnavailable: the backend, or a quorum of it, could not be reached.
	ErrUnavailable = errors.New("dlock: backend unavailable")
	// ErrInvalidKey: an empty key, or one longer than MaxKeyLen bytes.
	ErrInvalidKey = errors.New("dlock: invalid key")
	// ErrInvalidOption: an argument out of range (a TTL <= 0, or outside
	// the backend's limits; a record value that is not UTF-8 of 1 to
	// MaxRecordLen bytes).
	ErrInvalidOption = errors.New("dlock: invalid option")
)

// HeldError reports that a key is held and, when the backend knows, how long
// the holder's lease still runs. It matches ErrNotAcquired with errors.Is.
// The portable layer uses Remaining to wake up when the lease would expire,
// since expiry publishes nothing on most stores.
type HeldError struct {
	Remaining time.Duration // 0 when unknown
}

func (e *HeldError) Error() string {
	if e.Remaining > 0 {
		return fmt.Sprintf("%v (lease ends in %v)", ErrNotAcquired, e.Remaining.Round(time.Millisecond))
	}
	return ErrNotAcquired.Error()
}

// Is makes errors.Is(err, ErrNotAcquired) true.
func (e *HeldError) Is(target error) bool { return target == ErrNotAcquired }

// Unavailable wraps a transport or server error so that it matches
// ErrUnavailable while keeping the original in the chain.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// Why a hold was lost. The dlock package re-exports these values; an error
// matching ErrLockLost from the portable layer also matches exactly one of
// them.
var (
	// ErrRenewalFailed: renewals were attempted and failed (the backend did
	// not answer in time, or answered with an error) until the validity
	// window had nearly run out.
	ErrRenewalFailed = errors.New("dlock: renewal failed")
	// ErrReportedLost: the backend said the hold had ended: the session
	// expired, the key was deleted or taken over, a renewal or release found
	// the lock no longer this hold's, while the validity window was still
	// open by the hold's own clock. Told after that, it is the expiry the
	// watchdog declares: ErrRenewalFailed or ErrLeaseExpired.
	ErrReportedLost = errors.New("dlock: backend reported the hold ended")
	// ErrLeaseExpired: the validity window ran out with no renewal
	// attempted (auto-renew off and no Renew, or a process paused past its
	// lease before the watchdog could run).
	ErrLeaseExpired = errors.New("dlock: lease expired unrenewed")
	// ErrMaxHoldReached: the hold reached its maximum duration
	// (dlock.WithMaxHold); the watchdog stopped renewing it and it was
	// released.
	ErrMaxHoldReached = errors.New("dlock: maximum hold reached")
)
