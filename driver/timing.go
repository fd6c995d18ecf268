package driver

import "time"

// The timing rules below, with DriftAllowance, are the whole of the
// portable layer's clock: when a hold is renewed, when it is given up, how
// soon a failed renewal is tried again and how renewals are batched.
// Drivers that keep a lease of their own (a shared lease or session, a
// keepalive, a heartbeat) and tools that judge whether a backend can keep
// up use the same names, so that the cadence they assume is the one the
// watchdog keeps.

// RenewInterval is how long after a lease was granted or last extended the
// watchdog renews it: a third of the TTL. Two renewals can fail, or one can
// take most of a third, before the lease runs out, and a renewal costs one
// request per hold every TTL/3, three per TTL.
func RenewInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// LossMargin is how long before the validity window closes (Since + TTL -
// DriftAllowance) the watchdog gives a hold up when no renewal has
// succeeded: a tenth of the TTL, so that Done is closed while the lease
// still runs on the server and the holder has that long to stop.
func LossMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// RetryInterval is the pause before a renewal that failed transiently (an
// error that is neither a loss nor "not held") is tried again: a twentieth
// of the TTL, so that a hold gets several tries between its renewal time
// and its loss time without flooding a backend that is struggling. Callers
// put their own floor under it for very short leases.
func RetryInterval(ttl time.Duration) time.Duration { return ttl / 20 }

// RenewGridStep is the step of a Locker's renewal grid: each renewal time
// moves to the nearest multiple of a twelfth of the TTL, so that holds of
// one TTL granted within the same step fall due together and are renewed in
// one batch. A renewal moves by at most half a step, a twenty-fourth of the
// lease, and the interval between renewals stays RenewInterval on average.
func RenewGridStep(ttl time.Duration) time.Duration { return ttl / 12 }
