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

// Lease describes a current hold: its token and its validity window.
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

// Hold is the shape every lock of this package gives its holder: a Mutex,
// a MultiMutex (the set), a Semaphore (its permit) and an Election (its
// term). Token and Lease read the monotonic clock, so a hold whose validity
// window has run out reads as ended (token 0, zero Lease) even before the
// watchdog runs; Done closes when the hold ends, and Err says why (nil
// while held, ErrUnlocked, ErrClosed, or an error matching ErrLockLost).
type Hold interface {
	// Token returns the fencing token of the current hold, 0 if none.
	Token() Token
	// Lease returns the current hold's lease; the zero Lease if none.
	Lease() Lease
	// Done returns a channel closed when the current hold ends. With no
	// hold it returns an already-closed channel.
	Done() <-chan struct{}
	// Err reports why the last hold ended: nil while held or if nothing
	// was ever held.
	Err() error
	// Renew extends the lease to a full TTL from now (the watchdog does it
	// on its own unless WithAutoRenew(false)).
	Renew(ctx context.Context) error
	// Unlock ends the hold and gives the key back, even when ctx has ended.
	Unlock(ctx context.Context) error
}

// Lockable is a Hold that can be taken: what Do runs a function under.
// Mutex, MultiMutex, Semaphore, Election and RWMutex (its writer; RLocker
// gives its reader) are all Lockable.
type Lockable interface {
	Hold
	// Lock blocks until the hold is taken or ctx ends, waiting on the
	// backend's notifications.
	Lock(ctx context.Context) error
	// TryLock makes one attempt; it returns an error matching
	// ErrNotAcquired when the hold is taken elsewhere.
	TryLock(ctx context.Context) error
}

var (
	_ Lockable = (*Mutex)(nil)
	_ Lockable = (*MultiMutex)(nil)
	_ Lockable = (*Semaphore)(nil)
	_ Lockable = (*Election)(nil)
	_ Lockable = (*RWMutex)(nil)
	_ Lockable = rlocker{}
)
