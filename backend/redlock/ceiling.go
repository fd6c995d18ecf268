package redlock

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*Driver)(nil)

// counterLead bounds how far an instance's fencing counter can run ahead
// of its clock: a counter is max(counter + 1, TIME in µs), so it leads
// the clock only by the acquisitions of one key that came faster than
// one per microsecond, summed over its life.
const counterLead = 1 << 32

// TokenCeiling returns the highest clock of every instance, in
// microseconds, plus counterLead: a token is the highest of a majority's
// counters, each floored at its instance's clock, so none issued before
// the call is above it. Every instance must answer (one that does not
// might have the fastest clock): else an ErrUnavailable error.
func (d *Driver) TokenCeiling(ctx context.Context) (uint64, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	var highest uint64
	for _, in := range d.inst {
		t, err := in.client.Time(ctx).Result()
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, driver.Unavailable(fmt.Errorf("redlock: instance %s: TIME: %w (every instance must answer to bound the tokens)", in.addr, err))
		}
		highest = max(highest, uint64(t.UnixMicro()))
	}
	return highest + counterLead, nil
}
