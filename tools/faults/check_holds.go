package faults

import (
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// CheckDoneBeforeLeaseEnd (a many-holds run): every hold worker took
// reported its loss, each before its lease could end on the store: the
// instant its Done closed is before the validity deadline it last had
// plus the drift allowance the portable layer took off it (the deadline
// is sent + TTL - driver.DriftAllowance(TTL), so that sum is when the
// store may end the lease at the soonest).
func CheckDoneBeforeLeaseEnd(h History, worker int) Check {
	c := Check{Name: "done-before-lease-end"}
	open := map[string]bool{}
	var lost int
	closest := time.Duration(1<<63 - 1)
	for _, e := range sorted(h.Events) {
		if e.Worker != worker {
			continue
		}
		switch e.Kind {
		case EvAcquire:
			open[e.Key] = true
		case EvLost:
			if !open[e.Key] {
				continue
			}
			delete(open, e.Key)
			lost++
			if e.Expires == 0 || e.TTL == 0 {
				c.Violations++
				if c.Detail == "" {
					c.Detail = fmt.Sprintf("%s: lost with no deadline or TTL reported", e.Key)
				}
				continue
			}
			end := e.Expires + int64(driver.DriftAllowance(time.Duration(e.TTL)))
			margin := time.Duration(end - e.Mono)
			closest = min(closest, margin)
			if margin < 0 {
				c.Violations++
				if c.Detail == "" {
					c.Detail = fmt.Sprintf("%s (TTL %v): Done closed %v after the lease could end on the store",
						e.Key, time.Duration(e.TTL), (-margin).Round(time.Millisecond))
				}
			}
		}
	}
	if len(open) > 0 {
		c.Violations += len(open)
		if c.Detail == "" {
			c.Detail = fmt.Sprintf("%d of %d holds never reported their loss", len(open), len(open)+lost)
		}
	}
	switch {
	case c.Violations > 0:
		c.Detail = fmt.Sprintf("%d of %d holds late or missing; first: %s", c.Violations, len(open)+lost, c.Detail)
	case lost == 0:
		c.Violations, c.Detail = 1, "no hold was lost"
	default:
		c.Detail = fmt.Sprintf("%d holds, each Done closed before the lease could end, the closest %v before",
			lost, closest.Round(time.Millisecond))
	}
	return c
}
