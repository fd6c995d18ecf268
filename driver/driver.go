// Package driver defines the contract a dlock backend implements.
//
// The portable package dlock owns everything that must behave the same on
// every backend: option validation, the validity clock, the renewal
// watchdog, Done channels, the in-process gate that coalesces waiters, error
// wrapping and the URL registry. A driver does only what differs between
// stores: one acquire attempt, release, renew, and a way to wait for a
// change. A driver is written against this package, registered with
// dlock.Register, and used by programs only through dlock's types.
//
// # Required interfaces
//
// Every backend implements [Locker]. Its methods are called concurrently for
// different keys, and for one key only by one holder at a time within a
// process (the portable layer serialises same-key callers of one Locker).
// Every method takes a context and must return promptly once it ends.
//
// Two more are separate interfaces, found by type assertion, but every
// backend must implement them: the conformance suite
// (github.com/dlock-go/dlock/conformance, whose Harness.NewDriver hands it
// the driver) fails a driver without them, and parts of dlock's API
// return an error on one.
//
//   - [Inspector]: who holds a key, and breaking a hold from outside.
//     Locker.Inspect, Locker.Break and NewElection need it.
//   - [Recorder]: a small value per key, apart from its lock, written once
//     and read by every later caller. A Semaphore records its number of
//     permits with it. [CheckRecord] is the rule for its keys and values.
//
// # Optional interfaces
//
// A Locker may also implement these seven, which the portable layer checks
// with a type assertion and does without:
//
//   - [Acquirer]: a blocking, queue-based acquire (etcd, ZooKeeper, Redis, mem://). When
//     present, *dlock.Mutex.Lock calls it instead of looping over
//     TryAcquire and Watch.
//   - [LockWatcher]: a Watch for a waiting Lock that may wake one waiter
//     at a time instead of all at once (a wake queue on the server).
//   - [Limiter]: the TTLs the backend can honour (etcd leases start at 2 s,
//     Consul sessions at 10 s and end at 24 h). dlock rejects other TTLs
//     when a Mutex is created, instead of letting the server round them
//     silently or the driver's arithmetic overflow.
//   - [BatchRenewer]: renews many holds in one call (a pipeline, one
//     request for a shared lease). The portable layer's renewal scheduler
//     hands it every hold that is due at once, instead of one Renew each.
//   - [OwnerCheckedRenewer]: a renewal changes the store only while the
//     hold is still the holder there, so that Unlock need not wait for a
//     batched renewal in flight before it releases.
//   - [LossNotifier]: calls back when a hold is lost, so that the portable
//     layer needs no goroutine per hold to wait on Hold.Lost.
//   - [Lapser]: ends a hold while its key stays held for a while, for a
//     minimum hold (dlock.WithMinHold). Without it, a minimum hold is
//     refused.
//
// The conformance suite checks the promises of the optional interfaces a
// driver has (each RenewBatch answer is its own hold's; a late
// owner-checked renewal changes nothing), so a driver needs no tests of
// its own for them: only for what is its own (a quorum, its store's
// layout, its servers' failures).
//
// # Errors
//
// A driver reports outcomes with the sentinel errors of this package,
// wrapped with whatever detail helps (fmt.Errorf("...: %w", ErrNotAcquired)).
// dlock re-exports the same values, so errors.Is works in user code without
// translation. Network and server failures must wrap [ErrUnavailable]; a
// context error from the caller's context should be returned as is (the
// portable layer decides whether the server was reached at all).
package driver

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"
)

// Request is one acquire attempt.
type Request struct {
	// Key is the user's key: non-empty, at most MaxKeyLen bytes, any bytes.
	// The driver maps it injectively onto its own namespace (escaping "/",
	// hashing, ...). Two different keys must never share a lock.
	Key string
	// TTL is the lease the holder asks for. It is within the driver's
	// Limits when the driver implements Limiter.
	TTL time.Duration
	// Owner is a random identifier (32 hex digits) unique to this hold. The
	// driver stores it with the lock so that release and renew can check
	// they act on their own hold and never on a successor's.
	Owner string
	// Meta is the holder's description (dlock.WithOwner; by default host
	// name, PID and program), valid UTF-8 of at most MaxMetaLen bytes. The
	// driver stores it with the lock, for Inspect to report; it plays no
	// part in ownership checks.
	Meta string
	// MinHold, when not zero, is the hold's minimum duration
	// (dlock.WithMinHold): its key must stay held on the store until
	// MinHold has passed from the grant, whether the holder releases early
	// (the portable layer then calls Lapser.ReleaseAfter), closes its
	// Locker, or dies. The portable layer already asks a lease of at least
	// MinHold (TTL is raised to it, within Limits); a driver whose keys
	// live only as long as a session must keep the minimum some other way
	// (see Lapser).
	MinHold time.Duration
}

// DriftAllowance is what the portable layer takes off every validity
// window for clock drift between client and server, as in the Redlock
// reference: 1% of the TTL plus 2ms. A hold's window ends at Since + TTL -
// DriftAllowance(TTL).
func DriftAllowance(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// MaxMetaLen is the longest hold metadata, in bytes.
const MaxMetaLen = 1024

// Hold describes a granted lock. The portable layer passes it back to
// Release and Renew unchanged.
type Hold struct {
	// Token is the fencing token: strictly greater than the token of every
	// earlier holder of the same key. Never 0.
	Token uint64
	// TTL is the lease the server granted (it may be rounded up from the
	// request, e.g. to whole seconds).
	TTL time.Duration
	// Since, when not zero, is the instant from which the lease runs: the
	// moment the request that granted or last extended the lease was sent.
	// Drivers whose lease predates the acquire (a session kept alive in the
	// background) set it; otherwise the portable layer uses the time it
	// sent the acquire request.
	Since time.Time
	// Lost, when not nil, is closed by the driver as soon as it learns the
	// hold has ended without a Release: session expired, key deleted or
	// overwritten, quorum lost.
	Lost <-chan struct{}
	// State is the driver's own data for this hold (a value, a session ID,
	// a node path).
	State any
}

// Locker is one connected backend.
type Locker interface {
	// TryAcquire makes one attempt to take req.Key. When the key is held by
	// someone else it returns an error wrapping ErrNotAcquired, preferably a
	// *HeldError carrying how long the current lease still runs.
	TryAcquire(ctx context.Context, req Request) (Hold, error)

	// Release frees the lock if h is still its current hold. If the lock
	// has expired or now belongs to someone else it changes nothing and
	// returns an error wrapping ErrNotHeld.
	Release(ctx context.Context, h Hold) error

	// Renew extends h to a full TTL again and returns the granted TTL. If
	// the hold was lost it returns an error wrapping ErrNotHeld or
	// ErrLockLost and changes nothing.
	Renew(ctx context.Context, h Hold) (time.Duration, error)

	// Watch starts watching key for changes that may free it. The watch
	// must be established (subscription confirmed, watch created) when
	// Watch returns, so that a release that happens after Watch returns is
	// never missed. The portable layer calls Watch before TryAcquire.
	Watch(ctx context.Context, key string) (Watch, error)

	// Close releases the driver's resources (connections, sessions,
	// goroutines). Holds still open are released by the portable layer
	// before Close is called.
	Close() error
}

// Watch is a live watch on one key.
type Watch interface {
	// Changed receives a value after a change that may have freed the key.
	// It is buffered: a change that happens while nobody receives is kept
	// until the next receive. A closed channel means the watch broke; the
	// portable layer then falls back to the lease timer and re-watches.
	Changed() <-chan struct{}
	// Close stops the watch and frees what it holds on the server.
	Close() error
}

// Acquirer is implemented by drivers whose waiters queue on the server
// (create-revision order in etcd, sequential znodes in ZooKeeper, a line
// per key in mem://). Acquire
// blocks until the hold is granted or ctx ends; when ctx ends it must leave
// nothing behind (no queue entry) and return ctx's error. If the request
// had reached the server and was waiting behind a holder, the error must
// also match ErrNotAcquired (fmt.Errorf("%w: %w", ErrNotAcquired, ctx.Err())),
// so that the caller sees a deadline, not an unreachable backend.
//
// The Hold it returns must set Since: the portable layer's own send time is
// the start of a wait that may have lasted longer than the lease.
type Acquirer interface {
	Acquire(ctx context.Context, req Request) (Hold, error)
}

// LockWatcher is implemented by drivers that wake waiting Locks one at a
// time instead of all at once (a wake queue on the server).
//
// WatchLock is Watch for a Lock that calls TryAcquire with the same key
// after each change, and after the remaining lease of a HeldError. While the
// watch is open, the driver may treat the TryAcquire calls of key as that
// waiter's: a refused one puts it in line, and a release may wake only the
// first waiter in line, which must then attempt (or Close the watch, which
// hands the wake on). A waiter that is not woken still retries when the
// holder's remaining lease runs out, so a lost wake costs time, never the
// lock. The portable layer calls WatchLock, when a driver has it, before a
// Lock's first attempt (so WatchLock should cost no round trip once a
// Locker has made one), and makes no second attempt after it; Watch stays
// for observers, which must see every release.
type LockWatcher interface {
	WatchLock(ctx context.Context, key string) (Watch, error)
}

// Limits are the lease lengths a backend can honour. dlock refuses a TTL
// outside them with ErrInvalidOption, naming the limit, when a Locker or a
// Mutex is made; a driver is never asked for another.
//
// MaxTTL is the longest lease the store and the driver's own arithmetic
// on it honour exactly: the store's largest expiry (etcd's largest lease,
// Consul's largest session TTL, ZooKeeper's session timeout), and every
// conversion the driver makes (a TTL in milliseconds or microseconds, an
// expiry as nanoseconds since 1970, server time plus the TTL in a script)
// without overflow or rounding to a shorter lease. A TTL beyond it must
// never reach the store: a lease that wraps around to one already ended
// lets two holders in. Every driver should declare it, as a round number
// with margin, and document it. Whatever a driver declares, dlock accepts
// no TTL above dlock.MaxTTL (10 years), which bounds the portable
// layer's own arithmetic and leaves a driver room for its own.
type Limits struct {
	MinTTL time.Duration // smallest TTL (e.g. 2s for etcd); 0 means any positive TTL
	MaxTTL time.Duration // largest TTL; 0 means dlock.MaxTTL
}

// Limiter is implemented by drivers that cannot honour every TTL.
type Limiter interface {
	Limits() Limits
}

// BatchRenewer is implemented by drivers that can renew many holds for the
// cost of one (or a few) round trips: a pipeline of renew scripts, one
// keepalive of a lease the holds share. The portable layer calls it with
// the holds whose renewal is due together (at most a few thousand at a
// time) and a context whose deadline is the earliest of their loss
// deadlines.
//
// It returns one TTL and one error per hold, in the order of hs, each
// exactly what Renew would have returned for that hold alone: the same
// ownership check, ErrNotHeld or ErrLockLost for a hold that was lost,
// an error wrapping ErrUnavailable when its outcome is unknown. A failure
// of the whole call (the server unreachable) is that error for every hold.
type BatchRenewer interface {
	RenewBatch(ctx context.Context, hs []Hold) ([]time.Duration, []error)
}

// OwnerCheckedRenewer is implemented by drivers whose renewal of a hold
// changes the store only while that hold is the key's holder there (the
// Redis backends' compare-and-PEXPIRE on the hold's own Owner, the file
// backend's owner and token check under the file's flock): a renewal
// that arrives after the hold's release, or after another holder took
// the key, changes nothing.
//
// The portable layer otherwise makes an Unlock wait for a renewal of the
// hold in flight, so that none reaches the store after the release. A
// batched renewal (BatchRenewer) returns when every hold in it was
// renewed: with many holds due together on a busy store, that can take
// most of a renewal interval, and every Unlock of one of them would wait
// as long. When OwnerCheckedRenewals reports true, an Unlock stops waiting
// for a batched renewal (the call still runs, and Close still waits for
// it) and releases at once; a single renewal (Renew) is still cancelled
// and waited for.
//
// The one effect a late renewal can have: when the release did not reach
// the store (an error, an instance that did not answer), the lock it left
// behind there may be extended by one more TTL before it expires.
type OwnerCheckedRenewer interface {
	OwnerCheckedRenewals() bool
}

// LossNotifier is implemented by drivers whose holds carry a Lost channel
// and that can call a function when it closes, without a goroutine per
// hold. A driver that keeps a [Loss] per hold has OnLost for the price of
// its Loss.OnLost.
//
// OnLost arranges for f to be called once, in a goroutine of its own, after
// h.Lost is closed; at once if it is already closed. The returned stop
// undoes that: it reports whether it stopped f from being called (false
// when f has already been started or stop was called before), as
// context.AfterFunc's stop does. The portable layer calls stop when the
// hold ends otherwise.
type LossNotifier interface {
	OnLost(h Hold, f func()) (stop func() bool)
}

// Lapser is implemented by drivers that can let a hold lapse: end it for
// its holder while its key stays held on the store for a given time, then
// frees itself as a release would, whatever becomes of the holder's
// process, connection or session in between. The portable layer calls it
// for a hold made with dlock.WithMinHold that is unlocked (or whose Locker
// is closed) before its minimum has passed; a Mutex with a minimum hold
// on a driver without it is refused with ErrInvalidOption.
type Lapser interface {
	// ReleaseAfter leaves h's key held for d more (rounded up to what the
	// store can express, never down), then free: waiters are woken when
	// it frees, or retry at the remaining lease a HeldError reported. It
	// is owner-checked as Release is: if h is no longer the key's hold it
	// changes nothing and returns an error wrapping ErrNotHeld. After it
	// returns, the driver keeps nothing of h: closing the driver must not
	// free the key early.
	ReleaseAfter(ctx context.Context, h Hold, d time.Duration) error
}

// Info is what the server knows of a key: the answer to Inspect.
type Info struct {
	// Held reports whether a lease on the key is live on the server.
	Held bool
	// Token is the holder's fencing token; 0 when free.
	Token uint64
	// Remaining is how long the holder's lease still runs on the server
	// (0 when free or unknown).
	Remaining time.Duration
	// Meta is the holder's Request.Meta.
	Meta string
	// Waiters is how many requests wait in the backend's queue for the key
	// (etcd, ZooKeeper, Redis); -1 for a backend without a server-side queue.
	Waiters int
}

// Inspector is implemented by every driver (the conformance suite fails
// one without it): it reports who holds a key, and
// breaks a hold from outside, as an operator would (the broken holder's
// next renewal finds it gone, so its Done closes within its renewal
// interval, and the next holder's token is higher).
type Inspector interface {
	// Inspect reports what the server holds for key, changing nothing.
	Inspect(ctx context.Context, key string) (Info, error)
	// Break removes whatever holds key (and, on queue backends, leaves the
	// waiters queued). It returns what it removed: Held false when the key
	// was free.
	Break(ctx context.Context, key string) (Info, error)
}

// MaxKeyLen is the longest key, in bytes, that dlock accepts.
const MaxKeyLen = 4096

// MaxRecordLen is the longest record value, in bytes.
const MaxRecordLen = 256

// Recorder is implemented by every driver (the conformance suite fails one
// without it, and a Semaphore needs it): a small value per key that
// outlives every hold, written once, by the first caller, and read by
// every later one, until cleared. A dlock.Semaphore records its number of
// permits with it, so that a client whose number differs is refused before
// it takes a permit.
//
// A key's record is apart from the key's lock, and from the lock of every
// other key: acquiring, releasing or breaking any lock leaves it alone,
// and Inspect does not see it. Keys follow the rules of Request.Key;
// values are valid UTF-8 of 1 to MaxRecordLen bytes.
type Recorder interface {
	// Record makes value key's record unless key has one, and returns the
	// record: value, or the one found. Of concurrent calls with different
	// values, one wins and every call returns its value: the write is a
	// create-if-absent as linearizable as the backend's locks (on Redlock,
	// the value a majority of instances hold; an error wrapping
	// ErrUnavailable when no value has a majority).
	Record(ctx context.Context, key, value string) (string, error)
	// ClearRecord deletes key's record if it is value (everywhere it is,
	// on Redlock), and reports whether one was deleted. A record with
	// another value is left alone.
	ClearRecord(ctx context.Context, key, value string) (bool, error)
}

// CheckRecord refuses a key or a value outside Recorder's rules: a key
// that is empty or longer than MaxKeyLen bytes (an error wrapping
// ErrInvalidKey), a value that is not valid UTF-8 of 1 to MaxRecordLen
// bytes (ErrInvalidOption). Every driver's Record and ClearRecord call it
// before anything else, so that every backend refuses the same records.
func CheckRecord(key, value string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("record: %w: key of %d bytes, want 1 to %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	if value == "" || len(value) > MaxRecordLen || !utf8.ValidString(value) {
		return fmt.Errorf("record: %w: value must be UTF-8 of 1 to %d bytes", ErrInvalidOption, MaxRecordLen)
	}
	return nil
}
