package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.BatchRenewer = (*Driver)(nil)

func state(h driver.Hold) (*attempt, error) {
	st, _ := h.State.(*attempt)
	if st == nil {
		return nil, fmt.Errorf("redlock: foreign hold: %w", driver.ErrNotHeld)
	}
	return st, nil
}

// flagSet accepts a compare-owner script's reply of 1.
func flagSet(val any, err error) bool {
	ok, perr := redislua.ParseFlag(val)
	return err == nil && perr == nil && ok
}

// tally counts the answers of a compare-owner script: 1 = done on an
// instance where the lock was ours, 0 = not ours there, error = unknown.
type tally struct {
	ok, no, unknown int
	firstErr        error
}

func (d *Driver) tally(replies []reply) tally {
	var t tally
	for _, r := range replies {
		d.count(&t, r)
	}
	return t
}

// count adds one instance's reply to t.
func (d *Driver) count(t *tally, r reply) {
	done, err := r.val, r.err
	var ok bool
	if err == nil {
		ok, err = redislua.ParseFlag(done)
	}
	switch {
	case err != nil:
		t.unknown++
		if t.firstErr == nil {
			t.firstErr = d.instErr(reply{inst: r.inst, err: err})
		}
	case ok:
		t.ok++
	default:
		t.no++
	}
}

// Release deletes the lock on every instance where it is still this hold's,
// in parallel, and publishes a release message on each. It returns once a
// majority deleted it (the others still get the request); when a majority
// no longer had it, the hold had been lost (ErrNotHeld). An instance whose
// acquire has not answered yet is released when it does (attempt.answer),
// so the release cannot overtake it.
func (d *Driver) Release(ctx context.Context, h driver.Hold) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	st, err := state(h)
	if err != nil {
		return err
	}
	t := d.tally(d.fanout(ctx, d.timeout(st.ttl), st.end(), st.releaseRequest(true), d.quorum, flagSet))
	switch {
	case t.ok >= d.quorum:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case t.ok+t.unknown >= d.quorum:
		return driver.Unavailable(fmt.Errorf("redlock: released on %d of %d instances, %d unanswered: %w",
			t.ok, len(d.inst), t.unknown, t.firstErr))
	default:
		return fmt.Errorf("redlock: the lock was ours on only %d of %d instances: %w", t.ok, len(d.inst), driver.ErrNotHeld)
	}
}

// Renew extends the lock on every instance where it is still this hold's
// (compare-and-PEXPIRE, in parallel). It succeeds when a majority was
// extended. When a majority can no longer be reached even counting the
// instances that did not answer, the hold is lost (ErrLockLost); when it is
// only unknown, the error matches ErrUnavailable and the portable watchdog
// tries again until the validity window closes.
func (d *Driver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	st, err := state(h)
	if err != nil {
		return 0, err
	}
	return d.renewed(ctx, d.tally(d.fanout(ctx, d.timeout(st.ttl), st.renewable(), renewRequest(st), d.quorum, flagSet)), st)
}

func renewRequest(st *attempt) request {
	keys, args := redislua.RenewArgs(st.lock, st.owner, st.ttl.Milliseconds())
	return request{script: redislua.Renew, keys: keys, args: args}
}

// renewed is the outcome of a renewal whose replies were counted in t.
func (d *Driver) renewed(ctx context.Context, t tally, st *attempt) (time.Duration, error) {
	switch {
	case t.ok >= d.quorum:
		return d.grantedTTL(st.ttl), nil
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case t.ok+t.unknown < d.quorum:
		return 0, fmt.Errorf("redlock: the lock is ours on only %d of %d instances, %d needed: %w",
			t.ok, len(d.inst), d.quorum, driver.ErrLockLost)
	default:
		return 0, driver.Unavailable(fmt.Errorf("redlock: renewed on %d of %d instances, %d unanswered: %w",
			t.ok, len(d.inst), t.unknown, t.firstErr))
	}
}

// grantedTTL is the TTL reported after a renewal. The portable layer
// measures it from its own send time and subtracts TTL*0.01 + 2ms; with a
// larger drift factor, the reported TTL is shortened so that the validity
// window stays TTL - TTL*Drift - 2ms.
func (d *Driver) grantedTTL(ttl time.Duration) time.Duration {
	extra := d.extraDrift(ttl)
	if extra == 0 {
		return ttl
	}
	// r - (r/100 + 2ms) = ttl - ttl*Drift - 2ms
	return time.Duration(float64(ttl-extra-ttl/100) / 0.99)
}
