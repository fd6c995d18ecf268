package dlock

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// align moves a renewal time to the nearest point of the RenewGridStep grid,
// so that a hold is renewed once per RenewInterval on average: moving every renewal
// back to the point before made the interval 7/24 of the lease on average,
// one renewal in eight more than the watchdog asks for.
func TestAlignMovesToTheNearestGridPoint(t *testing.T) {
	epoch := time.Now()
	s := &scheduler{epoch: epoch}
	const ttl = 1200 * time.Millisecond // a step of 100ms
	step := driver.RenewGridStep(ttl)
	var sum time.Duration
	const n = 1000
	for i := range n {
		at := epoch.Add(time.Second + time.Duration(i)*step/n*7) // spread over 7 steps
		got := s.align(at, ttl)
		if off := got.Sub(epoch) % step; off != 0 {
			t.Fatalf("align(%v) = %v: %v off the grid", at.Sub(epoch), got.Sub(epoch), off)
		}
		d := got.Sub(at)
		if d < -step/2 || d > step/2 {
			t.Fatalf("align(%v) = %v: moved by %v, more than half a step", at.Sub(epoch), got.Sub(epoch), d)
		}
		sum += d
	}
	// Nearest: the moves cancel out (the old rounding down averaged half a
	// step early).
	if mean := sum / n; mean < -step/20 || mean > step/20 {
		t.Fatalf("renewals moved by %v on average; want about 0", mean)
	}
	if got := s.align(epoch.Add(-time.Second), ttl); !got.Equal(epoch.Add(-time.Second)) {
		t.Fatalf("a time before the epoch moved to %v", got.Sub(epoch))
	}
}
