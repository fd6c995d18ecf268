package file

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Lapser = (*fileDriver)(nil)

// ReleaseAfter lets h lapse (driver.Lapser): its state file's lease is
// set to end after more, to the nanosecond, and the key frees itself then
// as an expired lease does; waiters retry at the remaining lease their
// refused attempt was told. The lease is in the file, so neither closing
// the driver nor the process ending shortens it.
func (d *fileDriver) ReleaseAfter(ctx context.Context, h driver.Hold, after time.Duration) error {
	if after <= 0 {
		return d.Release(ctx, h)
	}
	if err := d.check(ctx); err != nil {
		return err
	}
	hs, err := holdOf(h)
	if err != nil {
		return err
	}
	err = extend(ctx, hs.path, func(s *state, now time.Time) error {
		if err := ours(h, s, now); err != nil {
			return err
		}
		s.expires = now.Add(after).UnixNano()
		return nil
	})
	if errors.Is(err, errNoFile) {
		return fmt.Errorf("file: %s was removed: %w", hs.path, driver.ErrNotHeld)
	}
	return err
}
