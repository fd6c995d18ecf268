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
	// The release goes to the instances that answered the acquire; one
	// that answers later is released when it does (attempt.answer), which
	// afterRelease cannot see: give the acquire's stragglers a moment.
	d.straggle(ctx, st.answered, d.timeout(st.ttl))
	p := d.startFanout(d.releaseTimeout(st.ttl), st.end(), st.releaseRequest(true), d.quorum, flagSet)
	t := d.tally(p.wait(ctx))
	d.trailRelease(st.key, p.g)
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

// releasePatience is how many per-instance timeouts a release waits for
// each instance's answer. Nothing is counted against the time a release
// takes: it returns once a majority released, so a slow or paused
// minority costs it nothing, and the hold's validity does not shrink while
// it waits. But a release given up on too early leaves the key locked
// until its lease runs out, and every waiter waits for that. A client busy
// enough to read its replies late (5,000 Locks at once through one Driver
// on 2 cores) missed the per-instance timeout on a few releases a burst,
// though the instances had answered in time.
const releasePatience = 10

// releaseTimeout is a release's per-instance timeout for a lease of ttl:
// releasePatience per-instance timeouts, which the cap of timeout keeps
// within ttl.
func (d *Driver) releaseTimeout(ttl time.Duration) time.Duration {
	return releasePatience * d.timeout(ttl)
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

// trailRelease remembers a release of key that returned before every
// instance answered it (a majority is enough), until they all have. This
// Driver's next attempt on key waits for that (afterRelease): sent at
// once, it could reach a slow instance before the release does, since the
// pipelines of one instance run on several connections, which the server
// serves in no set order. There it would be refused, join the line, and be
// handed the lock by the release it overtook: server work for an
// acquisition a majority had already granted.
func (d *Driver) trailRelease(key string, g *group) {
	if g == nil {
		return
	}
	select {
	case <-g.done:
		return
	default:
	}
	d.releasing.Store(key, (<-chan struct{})(g.done))
	go func() {
		select {
		case <-g.done: // every call ends: answered, timed out, or dropped
		case <-d.life.Done(): // or Close: nothing waits any more
		}
		d.releasing.CompareAndDelete(key, (<-chan struct{})(g.done))
	}()
}

// afterRelease waits until every instance answered this Driver's last
// release of key (see trailRelease), briefly (straggle).
func (d *Driver) afterRelease(ctx context.Context, key string, timeout time.Duration) {
	if v, ok := d.releasing.Load(key); ok {
		d.straggle(ctx, v.(<-chan struct{}), timeout)
	}
}

// straggleWait bounds how long a Lock or an Unlock waits for the last
// instances to answer the request before it (afterRelease, Release): long
// enough for an instance that is merely a little behind the others on a
// busy machine, short enough that a stalled one costs little.
const straggleWait = 5 * time.Millisecond

// straggle waits until done is closed, at most straggleWait (or timeout,
// when shorter), or until ctx ends.
func (d *Driver) straggle(ctx context.Context, done <-chan struct{}, timeout time.Duration) {
	if done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	t := time.NewTimer(min(straggleWait, timeout))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}
