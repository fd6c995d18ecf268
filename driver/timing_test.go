package driver_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// The timing rules keep their values and the order the watchdog relies
// on: a transient retry fits several times into the time between the loss
// margin and a renewal, and moving a renewal onto the grid never takes it
// past the loss time.
func TestTimingRules(t *testing.T) {
	const ttl = 30 * time.Second
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"RenewInterval", driver.RenewInterval(ttl), 10 * time.Second},
		{"LossMargin", driver.LossMargin(ttl), 3 * time.Second},
		{"RetryInterval", driver.RetryInterval(ttl), 1500 * time.Millisecond},
		{"RenewGridStep", driver.RenewGridStep(ttl), 2500 * time.Millisecond},
		{"DriftAllowance", driver.DriftAllowance(ttl), 302 * time.Millisecond},
	} {
		if c.got != c.want {
			t.Errorf("%s(%v) = %v; want %v", c.name, ttl, c.got, c.want)
		}
	}
	for _, ttl := range []time.Duration{time.Second, 10 * time.Second, 30 * time.Second, time.Hour} {
		renew, loss := driver.RenewInterval(ttl), ttl-driver.DriftAllowance(ttl)-driver.LossMargin(ttl)
		if latest := renew + driver.RenewGridStep(ttl)/2; latest+3*driver.RetryInterval(ttl) >= loss {
			t.Errorf("TTL %v: a renewal at %v (grid included) leaves fewer than three retries before the loss at %v", ttl, latest, loss)
		}
	}
}
