package redis

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.Lapser = (*redisDriver)(nil)

// ReleaseAfter lets h lapse (driver.Lapser): the lock key's expiry is set,
// owner-checked as a renewal is, to after from now, rounded up to the
// millisecond; the server then expires the key, whatever becomes of this
// process. The same script serves a standalone server, Sentinel and
// Cluster (one key, in the lock's hash slot); with WaitReplicas it waits
// for the replicas as a renewal does (a failover before they have it
// leaves the earlier, longer lease). Expiry publishes nothing: a waiter
// tries again at the remaining lease its refused attempt was told, at the
// latest after its queue entry's refresh interval (a third of its lease).
// A hold no longer the key's changes nothing and is ErrNotHeld.
func (d *redisDriver) ReleaseAfter(ctx context.Context, h driver.Hold, after time.Duration) error {
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
	keys, args := redislua.RenewArgs(st.calls.Lock(), st.calls.Owner(), redislua.Millis(after))
	v, acks, err := d.run(ctx, redislua.ScriptCall(redislua.Renew, keys, args))
	if err != nil {
		return d.mapErr(err)
	}
	ok, err := redislua.ParseFlag(v)
	if err != nil {
		return err
	}
	if !ok {
		return d.notHeld(ctx, st)
	}
	if d.cfg.WaitReplicas > 0 && acks < int64(d.cfg.WaitReplicas) {
		return d.replicaErr(acks)
	}
	return nil
}
