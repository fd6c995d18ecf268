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

// RenewBatch renews many holds in one pipeline, instead of one round trip
// per hold: of RenewMany calls, each for up to renewManyKeys holds (see
// renewMany), on a standalone or failover client; of the renew script, one
// per hold, on a Cluster (go-redis splits the pipeline by node: one round
// trip per node). Each hold's ownership check is the same as in Renew: a
// hold that is no longer its owner's is left unchanged and reported
// ErrNotHeld. A script the server does not have cached (NOSCRIPT, after a
// restart or SCRIPT FLUSH) is sent again in full, in a second pipeline for
// those calls only.
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
	if _, cluster := d.client.(*goredis.ClusterClient); !cluster {
		d.renewMany(ctx, idx, sts, ttls, errs)
		return ttls, errs
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
		ttls[i], errs[i] = d.renewed(ctx, sts[i], v)
	}
	return ttls, errs
}

// renewed turns the renew script's reply v for the hold of st into
// Renew's answer.
func (d *redisDriver) renewed(ctx context.Context, st *state, v any) (time.Duration, error) {
	ok, err := redislua.ParseFlag(v)
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return 0, d.notHeld(ctx, st)
	}
	return time.Duration(st.ttlMs) * time.Millisecond, nil
}

// renewManyKeys bounds the keys of one RenewMany call. The server runs a
// script to its end before it serves another client; a pipeline of single
// renewals let others in about every hundred commands (one read of the
// client's query buffer), and a call of 128 keeps to about as many.
const renewManyKeys = 128

// renewMany renews the holds idx on a client whose one server holds every
// key (standalone, or failover through Sentinel): the holds of one lease go
// in RenewMany calls of up to renewManyKeys each, all in one pipeline. A
// renewal then costs the server its share of one MGET and a PEXPIRE inside
// one script call for many holds, rather than a script call of its own. (On a Cluster, the keys
// of different locks are in different slots, which one script cannot
// touch, so each hold keeps its own renew script there.) The ownership
// check is the same as Renew's, key by key, and each hold gets its own
// answer.
func (d *redisDriver) renewMany(ctx context.Context, idx []int, sts []*state, ttls []time.Duration, errs []error) {
	var calls [][]int // the holds of each RenewMany call
	open := map[int64]int{}
	for _, i := range idx {
		c, ok := open[sts[i].ttlMs]
		if !ok || len(calls[c]) == renewManyKeys {
			c = len(calls)
			calls = append(calls, make([]int, 0, min(renewManyKeys, len(idx))))
			open[sts[i].ttlMs] = c
		}
		calls[c] = append(calls[c], i)
	}
	cmds := make([]*goredis.Cmd, len(calls))
	send := func(which []int, send func(context.Context, goredis.Scripter, []string, ...any) *goredis.Cmd) {
		pipe := d.client.Pipeline()
		for _, c := range which {
			keys, owners := make([]string, len(calls[c])), make([]string, len(calls[c]))
			for k, i := range calls[c] {
				keys[k], owners[k] = sts[i].calls.Lock(), sts[i].calls.Owner()
			}
			ks, as := redislua.RenewManyArgs(keys, owners, sts[calls[c][0]].ttlMs)
			cmds[c] = send(ctx, pipe, ks, as...)
		}
		// Each command carries its own error; Exec's is the first of them.
		_, _ = pipe.Exec(ctx)
	}
	all := make([]int, len(calls))
	for c := range all {
		all[c] = c
	}
	send(all, redislua.RenewMany.EvalSha)
	var again []int
	for c, cmd := range cmds {
		if noScript(cmd.Err()) {
			again = append(again, c)
		}
	}
	if len(again) > 0 {
		send(again, redislua.RenewMany.Eval)
	}
	for c, hs := range calls {
		v, err := cmds[c].Result()
		var vals []any
		var keyErrs []error
		if err == nil {
			vals, keyErrs, err = redislua.ParseRenewMany(v, len(hs))
		}
		for k, i := range hs {
			switch {
			case err != nil:
				errs[i] = mapErr(err)
			case keyErrs[k] != nil:
				errs[i] = mapErr(keyErrs[k])
			default:
				ttls[i], errs[i] = d.renewed(ctx, sts[i], vals[k])
			}
		}
	}
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
