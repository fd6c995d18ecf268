package redis

import (
	"context"
	"errors"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var (
	_ driver.BatchRenewer        = (*redisDriver)(nil)
	_ driver.OwnerCheckedRenewer = (*redisDriver)(nil)
)

// OwnerCheckedRenewals reports true: the renew script extends a lock only
// while its value is the hold's own Owner, which no later hold shares, so
// a renewal that reaches the server after the release changes nothing, and
// Unlock need not wait for the batch it is in.
func (d *redisDriver) OwnerCheckedRenewals() bool { return true }

// RenewBatch renews many holds in one pipeline of the renew script (on a
// Cluster, go-redis splits the pipeline by node: one round trip per node),
// instead of one round trip per hold. Each hold's ownership check is the
// renew script's own, exactly as in Renew: a hold that is no longer its
// owner's is left unchanged and reported ErrNotHeld. A script the server
// does not have cached (NOSCRIPT, after a restart or SCRIPT FLUSH) is sent
// again in full, in a second pipeline for those holds only.
//
// With WaitReplicas set, every renewal must be followed by its own WAIT on
// the connection that wrote it, so the holds are renewed one by one, as
// Renew does.
func (d *redisDriver) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(hs)), make([]error, len(hs))
	if err := d.check(ctx); err != nil {
		fill(errs, err)
		return ttls, errs
	}
	if d.cfg.WaitReplicas > 0 {
		for i, h := range hs {
			ttls[i], errs[i] = d.Renew(ctx, h)
		}
		return ttls, errs
	}
	sts := make([]*state, len(hs))
	idx := make([]int, 0, len(hs)) // the holds sent
	for i, h := range hs {
		st, err := stateOf(h)
		if err != nil {
			errs[i] = err
			continue
		}
		sts[i] = st
		idx = append(idx, i)
	}
	cmds := make([]*goredis.Cmd, len(hs))
	d.pipeRenew(ctx, idx, sts, cmds, redislua.Renew.EvalSha)
	var again []int
	for _, i := range idx {
		if noScript(cmds[i].Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		d.pipeRenew(ctx, again, sts, cmds, redislua.Renew.Eval)
	}
	reloaded := false
	for _, i := range idx {
		v, err := cmds[i].Result()
		if err != nil {
			if !reloaded {
				errs[i] = d.mapErr(err) // on a Cluster, reloads the slot map once
				reloaded = errors.Is(errs[i], driver.ErrUnavailable)
			} else {
				errs[i] = mapErr(err)
			}
			continue
		}
		ok, err := redislua.ParseFlag(v)
		switch {
		case err != nil:
			errs[i] = err
		case !ok:
			errs[i] = d.notHeld(ctx, sts[i])
		default:
			ttls[i] = time.Duration(sts[i].ttlMs) * time.Millisecond
		}
	}
	return ttls, errs
}

// pipeRenew sends the renew script of the holds idx in one pipeline, with
// send (EvalSha or Eval), and stores each command in cmds.
func (d *redisDriver) pipeRenew(ctx context.Context, idx []int, sts []*state, cmds []*goredis.Cmd,
	send func(context.Context, goredis.Scripter, []string, ...any) *goredis.Cmd) {
	pipe := d.client.Pipeline()
	for _, i := range idx {
		keys, args := redislua.RenewArgs(sts[i].calls.Lock(), sts[i].calls.Owner(), sts[i].ttlMs)
		cmds[i] = send(ctx, pipe, keys, args...)
	}
	// Each command carries its own error; Exec's is the first of them.
	_, _ = pipe.Exec(ctx)
}

// noScript reports whether err says the server does not have the script
// cached.
func noScript(err error) bool {
	return err != nil && (errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT"))
}

func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}
