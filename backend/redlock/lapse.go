package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.Lapser = (*Driver)(nil)

// ReleaseAfter lets h lapse (driver.Lapser): on every instance where the
// lock is still this hold's, in parallel, its expiry is set to after from
// now (compare-and-PEXPIRE, rounded up to the millisecond), and each
// instance frees the key by itself then. The majority rule is Release's:
// it succeeds once a majority set it; when a majority no longer had the
// lock, the hold had been lost (ErrNotHeld). An instance that does not
// answer keeps the lease it had, which is at least as long. Expiry
// publishes nothing: a waiter tries again at the remaining lease its
// refused attempt read on the instances (at the latest after its queue
// entries' refresh interval).
func (d *Driver) ReleaseAfter(ctx context.Context, h driver.Hold, after time.Duration) error {
	if after <= 0 {
		return d.Release(ctx, h)
	}
	if err := d.check(ctx); err != nil {
		return err
	}
	st, err := state(h)
	if err != nil {
		return err
	}
	keys, args := redislua.RenewArgs(st.lock, st.owner, redislua.Millis(after))
	req := request{script: redislua.Renew, keys: keys, args: args}
	t := d.tally(d.fanout(ctx, d.timeout(st.ttl), st.renewable(), req, d.quorum, flagSet))
	switch {
	case t.ok >= d.quorum:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case t.ok+t.unknown >= d.quorum:
		return driver.Unavailable(fmt.Errorf("redlock: lapse set on %d of %d instances, %d unanswered: %w",
			t.ok, len(d.inst), t.unknown, t.firstErr))
	default:
		return fmt.Errorf("redlock: the lock was ours on only %d of %d instances: %w", t.ok, len(d.inst), driver.ErrNotHeld)
	}
}
