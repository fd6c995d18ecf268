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
// the other, and one that finds the previous hold lost (not unlocked) goes
// on to acquire rather than report ErrAlreadyHeld. Mutexes on the same key
// made from the same Locker exclude each other, as Mutexes in different
// processes do.
//
// # The rules every backend follows
//
// The conformance suite (package conformance) checks each of these on every
// backend; the portable layer, not the driver, implements them.
//
//   - Acting under the lock. Done is a notification, not a guard: after a
//     pause (SIGSTOP, a long GC, a suspended VM) timers fire late, so Done
//     may still be open for a moment after the validity window ended. The
//     check to make immediately before acting is Lease().Valid(), or the
//     Err of the context Do hands out: both read the monotonic clock when
//     called. Token, Lease, Done, Err and Do's context declare the hold lost
//     as soon as the clock says its window has run down, whether or not the
//     watchdog has run.
//   - Why a hold ended. Err returns nil while the Mutex holds its lock (or
//     never held it); afterwards ErrUnlocked, ErrClosed, or an error
//     matching ErrLockLost and exactly one of ErrRenewalFailed,
//     ErrReportedLost and ErrLeaseExpired, with the backend's detail
//     wrapped. context.Cause of Do's context is the same error.
//   - A Lock whose context ends while the key is held elsewhere returns an
//     error matching the context's error and ErrNotAcquired (the backend
//     answered that the key was held; this includes waiting behind another
//     Mutex of the same Locker). It matches ErrUnavailable instead of
//     ErrNotAcquired only when the backend never answered during the call.
//   - Unlock after the hold was lost (and perhaps taken over) returns an
//     error matching ErrLockLost and never ErrNotHeld, whether or not the
//     loss had been noticed before Unlock. ErrNotHeld means the Mutex held
//     nothing to unlock.
//   - Do unlocks when fn returns, panics or calls runtime.Goexit; a panic
//     goes on with its original value once the lock is released.
//   - Close and calls in flight: see Locker.Close.
type Mutex interface {
	// Key returns the key given to NewMutex.
	Key() string
	// Lock blocks until the lock is held or ctx ends. Waiting is driven by
	// the backend's notifications, never by polling on a fixed interval.
	// When ctx ends first, Lock leaves nothing behind on the server and
	// returns an error matching ctx.Err() and ErrNotAcquired, or, if the
	// backend never answered, ctx.Err() and ErrUnavailable.
	Lock(ctx context.Context) error
	// TryLock makes one attempt. It returns ErrNotAcquired when the key is
	// held by another owner.
	TryLock(ctx context.Context) error
	// Unlock releases the lock. It returns ErrNotHeld when this Mutex does
	// not hold it, and ErrLockLost (after trying to release anyway, safely)
	// when the hold was lost before Unlock. The release does not stop when
	// ctx ends: a deferred Unlock(r.Context()) whose client went away still
	// gives the key back, with up to 5 s more after ctx ended, rather than
	// leaving it held on the server for a whole lease.
	Unlock(ctx context.Context) error
	// Renew extends the lease to a full TTL from now. It returns ErrNotHeld
	// when nothing is held and ErrLockLost when the hold was lost.
	Renew(ctx context.Context) error
	// Token returns the fencing token of the current hold, 0 if none.
	Token() Token
	// Lease returns the current hold's lease; the zero Lease if none.
	Lease() Lease
	// Done returns a channel closed when the current hold ends: by Unlock,
	// Close, or loss, which is signalled before the lease can expire on the
	// server. With no hold it returns an already-closed channel. It is a
	// notification; check Lease().Valid() before acting.
	Done() <-chan struct{}
	// Err reports why the last hold ended: nil while held or if nothing
	// was ever held; ErrUnlocked after Unlock (or Do's return); ErrClosed
	// when the Locker was closed under the hold; an error matching
	// ErrLockLost and one of ErrRenewalFailed, ErrReportedLost and
	// ErrLeaseExpired when it was lost. A new Lock resets it to nil.
	Err() error
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
	//
	// Once Close has begun, no Lock or TryLock returns success: calls in
	// flight are cut short and return ErrClosed, and a lock granted to one
	// of them during Close is released by that call before it returns.
	// Close waits for every call in flight (an Unlock in flight is given up
	// to 5s to finish its release), then releases every hold granted before,
	// so that when Close returns no lock taken through this Locker is left
	// on the server and no call is still running.
	Close() error

	// Inspect reports what the backend's server holds for key: whether it
	// is held, the holder's token, the lease left on the server, the
	// holder's description (WithOwner), and, on queue backends, how many
	// wait. It changes nothing and takes no lock.
	Inspect(ctx context.Context, key string) (Info, error)
	// Break removes whatever holds key, as an operator breaking a stuck
	// lock would, and returns what it removed. The broken holder learns of
	// it (its Done closes within its renewal interval: its next renewal
	// finds the lock gone), and the next holder's token is higher than the
	// broken one's, so a fence refuses the broken holder's late writes.
	Break(ctx context.Context, key string) (Info, error)
}
