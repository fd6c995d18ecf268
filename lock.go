package dlock

import (
	"context"
	"time"
)

// Token is a fencing token: strictly greater for every new holder of the
// same key, on every backend. Hand it to the resource the lock protects so
// that the resource can reject a holder that was paused past its lease (see
// package fence). 0 means "no lock held" and is never issued.
type Token uint64

// Lease describes the current hold of a Mutex.
type Lease struct {
	// Token is the fencing token of the hold.
	Token Token
	// TTL is the lease the backend granted; it may be longer than asked
	// for when the backend rounds (etcd leases are whole seconds).
	TTL time.Duration
	// Expires is the end of the validity window, on this process's
	// monotonic clock: the instant the acquire (or last renew) request was
	// sent, plus TTL, minus the allowance for clock drift (TTL*0.01 + 2ms).
	// A holder may act while time.Now().Before(Expires). It is measured from
	// the request, never from the reply, so a slow reply shortens it.
	Expires time.Time
}

// Valid reports whether the lease's validity window is still open.
func (l Lease) Valid() bool { return l.Token != 0 && time.Now().Before(l.Expires) }

// Mutex is a distributed lock on one key.
//
// A Mutex is a handle for one holder. It is not reentrant: Lock on a Mutex
// that holds its lock returns ErrAlreadyHeld. Its methods are safe for
// concurrent use; concurrent Lock calls on one Mutex are served one after
// the other. Mutexes on the same key made from the same Locker exclude each
// other, as Mutexes in different processes do.
type Mutex interface {
	// Key returns the key given to NewMutex.
	Key() string
	// Lock blocks until the lock is held or ctx ends. Waiting is driven by
	// the backend's notifications, never by polling on a fixed interval.
	// When ctx ends first, Lock leaves nothing behind on the server and
	// returns an error matching ctx.Err(); if the backend never answered, it
	// also matches ErrUnavailable.
	Lock(ctx context.Context) error
	// TryLock makes one attempt. It returns ErrNotAcquired when the key is
	// held by another owner.
	TryLock(ctx context.Context) error
	// Unlock releases the lock. It returns ErrNotHeld when this Mutex does
	// not hold it, and ErrLockLost (after trying to release anyway, safely)
	// when the hold was lost before Unlock.
	Unlock(ctx context.Context) error
	// Renew extends the lease to a full TTL from now. It returns ErrNotHeld
	// when nothing is held and ErrLockLost when the hold was lost.
	Renew(ctx context.Context) error
	// Token returns the fencing token of the current hold, 0 if none.
	Token() Token
	// Lease returns the current hold's lease; the zero Lease if none.
	Lease() Lease
	// Done returns a channel closed when the current hold ends: by Unlock,
	// or by loss, which is signalled before the lease can expire on the
	// server. With no hold it returns an already-closed channel.
	Done() <-chan struct{}
}

// Locker is one connected backend. Make one per process (it holds the
// connections) and any number of Mutexes from it.
type Locker interface {
	// NewMutex returns a Mutex for key. Options override the Locker's
	// defaults. An empty or over-long key is an ErrInvalidKey error; an
	// unusable TTL is an ErrInvalidOption error.
	NewMutex(key string, opts ...Option) (Mutex, error)
	// Close releases every lock still held through this Locker, then closes
	// the backend connection. Later calls return ErrClosed. Closing twice is
	// harmless.
	Close() error
}
