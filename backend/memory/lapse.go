package memory

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Lapser = (*memDriver)(nil)

// ReleaseAfter lets h lapse (driver.Lapser): its entry stays after more, then
// expires and wakes the key's watchers as a release does. The entry lives
// in the Store, so closing this driver leaves it in place.
func (d *memDriver) ReleaseAfter(ctx context.Context, h driver.Hold, after time.Duration) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	e, err := d.s.owned(h)
	if err != nil {
		return err
	}
	if after <= 0 {
		d.s.drop(e, false)
		return nil
	}
	e.extend(after)
	return nil
}
