package dlock

import (
	"fmt"
	"github.com/dlock-go/dlock/observe"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// DefaultTTL is the lease used when no TTL is given, brought within the
// backend's limits (driver.Limits: ZooKeeper's TTL is its session
// timeout). With auto-renew on, it bounds how long others wait after a
// holder dies without unlocking.
const DefaultTTL = 30 * time.Second

// MaxTTL is the longest lease dlock accepts on any backend: 10 years of 365
// days (a backend whose store honours less declares its own maximum,
// driver.Limits.MaxTTL). It keeps arithmetic on a lease from overflowing
// time.Duration: a longer TTL, such as math.MaxInt64 written for "forever",
// is refused with ErrInvalidOption. A lock meant to last as long as its
// holder runs needs no long TTL: the watchdog renews it (WithAutoRenew).
const MaxTTL = 10 * 365 * 24 * time.Hour

// Option configures a Locker's defaults (NewLocker, Open's URL parameters)
// or one Mutex (NewMutex).
type Option func(*options)

type options struct {
	ttl       time.Duration
	ttlSet    bool // given by WithTTL: never adjusted, refused if out of bounds
	autoRenew bool
	observers []observe.Observer
	meta      string // WithOwner; defaultOwner() unless metaSet
	metaSet   bool
	backend   string // the URL scheme, set by Open
	onClose   []func() error
	minHold   time.Duration // WithMinHold; 0 for none
	maxHold   time.Duration // WithMaxHold; 0 for none
}

func defaultOptions() options {
	return options{ttl: DefaultTTL, autoRenew: true}
}

// WithOnClose has the Locker call fn once it has closed: after Close has
// released every hold and closed the backend's driver. Give it to a
// backend's New over a client the program made for that Locker alone, so
// that closing the Locker closes the client too. Given more than once, the
// functions run in the order given and Close returns their errors joined.
// It applies to a Locker (NewLocker, Open, a backend's New); a lock's
// constructor ignores it.
func WithOnClose(fn func() error) Option {
	return func(o *options) {
		if fn != nil {
			o.onClose = append(o.onClose[:len(o.onClose):len(o.onClose)], fn)
		}
	}
}

// WithTTL sets the lease length. The backend may round it up (etcd: whole
// seconds) and rejects lengths it cannot honour (see driver.Limits; never
// more than MaxTTL) with an error matching ErrInvalidOption, when the
// Locker (NewLocker, Open) or the Mutex (NewMutex) is made, never at
// Lock. URL parameter: ttl=10s.
func WithTTL(d time.Duration) Option { return func(o *options) { o.ttl, o.ttlSet = d, true } }

// withinLimits brings the default TTL, when no TTL was given, within the
// backend's limits.
func (o options) withinLimits(lim driver.Limits) options {
	if o.ttlSet {
		return o
	}
	if lim.MaxTTL > 0 && o.ttl > lim.MaxTTL {
		o.ttl = lim.MaxTTL
	}
	if lim.MinTTL > 0 && o.ttl < lim.MinTTL {
		o.ttl = lim.MinTTL
	}
	return o
}

// WithAutoRenew turns the renewal watchdog on (the default) or off. With it
// on, a hold is renewed about every TTL/3 (driver.RenewInterval) until
// Unlock; when renewals keep failing, Done is closed before the lease can
// expire. With it off, the holder must call Renew itself, and Done closes
// when the validity window ends. URL parameter: autorenew=false.
func WithAutoRenew(on bool) Option { return func(o *options) { o.autoRenew = on } }

// WithMinHold gives every hold a minimum duration d: releasing it earlier
// (Unlock, Do returning, Close, or the process exiting) leaves the key held
// on the store until d has passed from the acquisition, and releases it at
// once when d has already passed. It keeps a scheduled job from running
// twice in one period when instances' clocks and schedules are apart:
// every instance's TryLock in the period finds the key held. The lapse is
// intended: it is not a loss, not logged or counted as one. The lease
// asked for is at least d, so that a holder that dies still keeps the key
// that long. Every client of a key should give it the same minimum.
// URL parameter: minhold=1m.
func WithMinHold(d time.Duration) Option { return func(o *options) { o.minHold = d } }

// WithMaxHold gives every hold a maximum duration d: once d has passed from
// the acquisition, the watchdog stops renewing the hold and releases it;
// Done is closed and Err matches ErrLockLost and ErrMaxHoldReached. It
// bounds what a holder stuck in a loop can keep from others. URL
// parameter: maxhold=10m.
func WithMaxHold(d time.Duration) Option { return func(o *options) { o.maxHold = d } }

func (o options) validate(lim driver.Limits) error {
	if o.metaSet {
		if err := validOwner(o.meta); err != nil {
			return err
		}
	}
	if o.ttl <= 0 {
		return fmt.Errorf("%w: TTL must be positive, got %v", ErrInvalidOption, o.ttl)
	}
	if o.ttl < 10*time.Millisecond {
		return fmt.Errorf("%w: TTL %v is below 10ms, too short to ever be valid", ErrInvalidOption, o.ttl)
	}
	if lim.MinTTL > 0 && o.ttl < lim.MinTTL {
		return fmt.Errorf("%w: TTL %v is below this backend's minimum of %v", ErrInvalidOption, o.ttl, lim.MinTTL)
	}
	if lim.MaxTTL > 0 && lim.MaxTTL <= MaxTTL && o.ttl > lim.MaxTTL {
		return fmt.Errorf("%w: TTL %v is above this backend's maximum of %v", ErrInvalidOption, o.ttl, lim.MaxTTL)
	}
	if o.ttl > MaxTTL {
		return fmt.Errorf("%w: TTL %v is above dlock's maximum of %v (dlock.MaxTTL, 10 years); a lock that should last as long as its holder runs needs auto-renew, not a longer TTL",
			ErrInvalidOption, o.ttl, MaxTTL)
	}
	return nil
}

// validateHolds checks the minimum and maximum hold (WithMinHold,
// WithMaxHold); lapser says whether the driver can keep a key held past
// its release (driver.Lapser), which a minimum hold needs.
func (o options) validateHolds(lapser bool) error {
	if o.minHold < 0 {
		return fmt.Errorf("%w: minimum hold must not be negative, got %v", ErrInvalidOption, o.minHold)
	}
	if o.maxHold < 0 {
		return fmt.Errorf("%w: maximum hold must not be negative, got %v", ErrInvalidOption, o.maxHold)
	}
	if o.minHold > MaxTTL || o.maxHold > MaxTTL {
		return fmt.Errorf("%w: a minimum or maximum hold above dlock's maximum of %v (dlock.MaxTTL)", ErrInvalidOption, MaxTTL)
	}
	if o.minHold > 0 && o.maxHold > 0 && o.maxHold < o.minHold {
		return fmt.Errorf("%w: maximum hold %v is shorter than the minimum hold %v", ErrInvalidOption, o.maxHold, o.minHold)
	}
	if o.minHold > 0 && !lapser {
		return fmt.Errorf("%w: this backend cannot keep a key held past its release (driver.Lapser), so a minimum hold cannot be kept", ErrInvalidOption)
	}
	return nil
}

// requestTTL is the lease asked of the driver: the TTL, raised to the
// minimum hold (within the backend's maximum) so that a holder that dies
// still keeps the key that long.
func (o options) requestTTL(lim driver.Limits) time.Duration {
	ttl := o.ttl
	if o.minHold > ttl {
		ttl = o.minHold
		if lim.MaxTTL > 0 && ttl > lim.MaxTTL {
			ttl = max(lim.MaxTTL, o.ttl)
		}
	}
	return ttl
}

// drift is the allowance for clock drift between client and server
// (driver.DriftAllowance).
func drift(ttl time.Duration) time.Duration { return driver.DriftAllowance(ttl) }
