package redlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

// holdState is the driver's data for one hold.
type holdState struct {
	names names
	owner string
	ttl   time.Duration // the TTL set on the instances, whole milliseconds
}

// refusal is an instance's answer that another owner holds the key.
type refusal struct {
	pttl   time.Duration // remaining lease there; < 0 when unknown
	holder string
}

// TryAcquire is one Redlock attempt with a two-phase fencing token.
//
// Phase 1 sends the acquire script to every instance in parallel: SET NX PX
// and, where that succeeds, INCR of the key's counter on that instance. The
// token T is the largest counter returned. Phase 2 raises the counter to T
// (compare-owner, then max) on the instances that won with a smaller one.
// The hold counts only if T is on a majority of counters, each written while
// the lock there was ours, and the whole exchange took less than the
// validity window. Any other outcome releases whatever may have been taken.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	ttl := time.Duration(redislua.Millis(req.TTL)) * time.Millisecond // PX is in whole ms
	timeout := d.timeout(ttl)
	nm := d.names(req.Key)
	start := time.Now()

	replies := d.fanout(ctx, timeout, d.all, request{acquireScript,
		[]string{nm.lock, nm.counter}, []any{req.Owner, ttl.Milliseconds()}})
	var (
		won      []int    // instances where the lock is ours
		counters []uint64 // their counters, same order
		refused  []refusal
		unknown  []int // no answer: the request may or may not have applied
		firstErr error
	)
	for _, r := range replies {
		won1, counter, ref, err := parseAcquire(r)
		switch {
		case err != nil:
			unknown = append(unknown, r.inst)
			if firstErr == nil {
				firstErr = d.instErr(reply{inst: r.inst, err: err})
			}
		case won1:
			won = append(won, r.inst)
			counters = append(counters, counter)
		default:
			refused = append(refused, ref)
		}
	}
	// Every instance where the lock may be ours: released on failure.
	mine := append(slices.Clone(won), unknown...)

	if len(won) < d.quorum {
		if err := ctx.Err(); err != nil {
			d.abandon(ctx, nm, req.Owner, mine, true)
			return driver.Hold{}, err
		}
		if answered := len(won) + len(refused); answered < d.quorum {
			d.abandon(ctx, nm, req.Owner, mine, true)
			return driver.Hold{}, driver.Unavailable(fmt.Errorf(
				"redlock: quorum unreachable: %d of %d instances answered, %d needed: %w",
				answered, len(d.inst), d.quorum, firstErr))
		}
		return driver.Hold{}, d.refuse(ctx, nm, req.Owner, mine, won, refused, time.Since(start))
	}

	token, err := d.fence(ctx, timeout, nm, req.Owner, won, counters)
	if err == nil {
		if valid := ttl - d.drift(ttl); time.Since(start) >= valid {
			err = driver.Unavailable(fmt.Errorf("redlock: the quorum answered after %v, past the validity window of %v",
				time.Since(start).Round(time.Millisecond), valid))
		}
	}
	if err != nil {
		d.abandon(ctx, nm, req.Owner, mine, true)
		if cerr := ctx.Err(); cerr != nil {
			return driver.Hold{}, cerr
		}
		return driver.Hold{}, err
	}
	return driver.Hold{
		Token: token,
		TTL:   ttl,
		// The portable layer subtracts TTL*0.01 + 2ms from Since + TTL;
		// a larger drift factor moves Since back by the difference.
		Since: start.Add(-d.extraDrift(ttl)),
		State: &holdState{names: nm, owner: req.Owner, ttl: ttl},
	}, nil
}

// parseAcquire reads one instance's answer to acquireScript.
func parseAcquire(r reply) (won bool, counter uint64, ref refusal, err error) {
	if r.err != nil {
		return false, 0, ref, r.err
	}
	v, _ := r.val.([]any)
	if len(v) < 2 {
		return false, 0, ref, fmt.Errorf("redlock: unexpected acquire reply %#v", r.val)
	}
	switch v[0] {
	case int64(1):
		s, _ := v[1].(string)
		counter, err = strconv.ParseUint(s, 10, 64)
		if err != nil {
			return false, 0, ref, fmt.Errorf("redlock: fencing counter %q is not an unsigned integer: %w", s, err)
		}
		return true, counter, ref, nil
	case int64(0):
		ref.pttl = -1
		if ms, ok := v[1].(int64); ok && ms >= -2 {
			ref.pttl = time.Duration(max(ms, 0)) * time.Millisecond
			if ms == -1 { // no expiry set: unknown
				ref.pttl = -1
			}
		}
		if len(v) > 2 {
			ref.holder, _ = v[2].(string)
		}
		return false, 0, ref, nil
	}
	return false, 0, ref, fmt.Errorf("redlock: unexpected acquire reply %#v", r.val)
}

// fence is phase 2: it returns the token once it is on a majority of
// counters, each written while the lock there was ours.
func (d *Driver) fence(ctx context.Context, timeout time.Duration, nm names, owner string,
	won []int, counters []uint64) (uint64, error) {
	token := slices.Max(counters)
	var behind []int
	for k, i := range won {
		if counters[k] < token {
			behind = append(behind, i)
		}
	}
	written := len(won) - len(behind) // phase 1 wrote the token there already
	if written >= d.quorum {
		// Enough counters hold the token. The ones behind stay behind:
		// that is safe (only a majority matters) and saves a round trip.
		return token, nil
	}
	var firstErr error
	for _, r := range d.fanout(ctx, timeout, behind, request{fenceScript,
		[]string{nm.lock, nm.counter}, []any{owner, strconv.FormatUint(token, 10)}}) {
		switch {
		case r.err != nil:
			if firstErr == nil {
				firstErr = d.instErr(r)
			}
		case r.val == int64(1):
			written++
		}
	}
	if written < d.quorum {
		if firstErr == nil {
			firstErr = errors.New("the lock expired on some instances between the two phases")
		}
		return 0, driver.Unavailable(fmt.Errorf("redlock: fencing token written on %d of %d instances, %d needed: %w",
			written, len(d.inst), d.quorum, firstErr))
	}
	return token, nil
}

// refuse handles an attempt that found the key held: it releases what this
// attempt took and returns a *driver.HeldError.
//
// When one other owner holds a majority, that owner's release will publish
// on a majority, so the partial locks of this attempt are removed quietly,
// and the wait is until enough of its leases run out. Otherwise no one holds
// a majority: several clients split the instances between them. Then the
// partial locks are removed with a release message (the other contenders
// may be waiting on exactly those), and the attempt sleeps a random delay
// before reporting, as the Redlock algorithm asks, so that the contenders
// do not retry in lockstep.
func (d *Driver) refuse(ctx context.Context, nm names, owner string, mine, won []int,
	refused []refusal, elapsed time.Duration) error {
	perHolder := map[string]int{}
	winner := false
	for _, r := range refused {
		perHolder[r.holder]++
		if perHolder[r.holder] >= d.quorum {
			winner = true
		}
	}
	d.abandon(ctx, nm, owner, mine, !winner)

	// Wait until enough refusing instances are free to make a quorum with
	// the ones this attempt found free.
	var pttls []time.Duration
	for _, r := range refused {
		if r.pttl >= 0 {
			pttls = append(pttls, r.pttl)
		}
	}
	slices.Sort(pttls)
	window := min(max(2*elapsed, time.Millisecond), d.cfg.Timeout)
	var remaining time.Duration
	if k := d.quorum - len(won) - 1; k >= 0 && k < len(pttls) {
		// A random part spreads the waiters that all wake at this expiry.
		remaining = pttls[k] + rand.N(window)
	}
	if !winner {
		t := time.NewTimer(rand.N(window))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return &driver.HeldError{Remaining: remaining}
}

// abandon releases the lock on the instances in idx after a failed
// attempt, in parallel and even when ctx has ended (bounded by the
// per-instance timeout). It is best effort: an instance that does not
// answer keeps the lock until its TTL.
func (d *Driver) abandon(ctx context.Context, nm names, owner string, idx []int, publish bool) {
	if len(idx) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.Timeout)
	defer cancel()
	d.release(cctx, d.cfg.Timeout, nm, owner, idx, publish)
}

// drift is the clock-drift allowance for ttl: TTL*Drift + 2ms.
func (d *Driver) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*d.cfg.Drift) + 2*time.Millisecond
}

// extraDrift is how much more the configured drift factor takes than the
// portable layer's TTL*0.01 + 2ms.
func (d *Driver) extraDrift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl) * (d.cfg.Drift - minDrift))
}
