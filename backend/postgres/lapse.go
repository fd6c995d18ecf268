package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Lapser = (*pgDriver)(nil)

// ReleaseAfter lets h lapse (driver.Lapser): the row's lease is set,
// owner-checked as a renewal is, to end after from now on the server's
// clock, rounded up to the microsecond; the key is free from then on, as
// an expired lease is, whatever becomes of this process or its
// connections. An expiry notifies nobody: a waiter tries again at the
// remaining lease its refused attempt read.
func (d *pgDriver) ReleaseAfter(ctx context.Context, h driver.Hold, after time.Duration) error {
	if after <= 0 {
		return d.Release(ctx, h)
	}
	if err := d.check(ctx); err != nil {
		return err
	}
	st, err := stateOf(h)
	if err != nil {
		return err
	}
	us := int64((after + time.Microsecond - 1) / time.Microsecond)
	tag, err := d.pool.Exec(ctx, d.sql.renew, st.hash, st.owner, us)
	if err != nil {
		return mapErr(ctx, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("postgres: lease expired, taken over or removed: %w", driver.ErrNotHeld)
	}
	return nil
}
