package dlock

import (
	"errors"

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
	ErrInvalidKey = errors.New("dlock: invalid key")
	// ErrInvalidOption: an option out of range (a TTL <= 0, or outside the
	// backend's limits).
	ErrInvalidOption = errors.New("dlock: invalid option")
)
