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

// refusal is an instance's answer that another owner holds the key.
type refusal struct {
	pttl   time.Duration // remaining lease there; < 0 when unknown
	holder string
}

// floorLead is how far ahead of this client's clock the counter floor of an
// acquire is set. The instances' own clocks floor the counter too; when the
// client's floor is above all of them (their clocks are within floorLead
// of this one's, minus the request's way there), every instance that grants
// sets the same counter, so the token is on all of them after phase 1 and
// phase 2 is not sent. With clocks further apart, phase 2 writes the token
// where it is behind, as before: the floor only saves a round trip.
const floorLead = 250 * time.Millisecond

// unsubscribedRetry is how soon a waiter tries again (plus up to as much
// at random) when no message may come to wake it: it was refused only by
// instances where its inbox is not subscribed, or the lock is split and
// some instances did not answer.
const unsubscribedRetry = 100 * time.Millisecond

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
	d.afterRelease(ctx, req.Key, timeout)
	nm := d.names(req.Key)
	kw := d.member(req.Key)
	var member string
	if kw != nil {
		// A waiting Lock: releases may have handed it the lock already.
		h, ok, m, err := d.claimGrants(ctx, kw, ttl)
		if ok {
			return h, err
		}
		member = m
	}
	turn, err := d.ops.Enter(ctx, d.closed)
	if err != nil {
		return driver.Hold{}, err
	}
	defer turn.Leave()
	a := newAttempt(d, nm, req.Key, req.Owner, ttl)
	start := time.Now()
	a.member, a.sent = member, start

	// Phase 1 waits for a majority of grants, else for every answer. The
	// instances that have not answered by then still get the request; one
	// that grants it later just holds the lock with the others (released
	// at Unlock, or at once if the hold has ended: see attempt.answer).
	floor := strconv.FormatInt(time.Now().Add(floorLead).UnixMicro(), 10)
	var w *redislua.RedlockWaiter
	if kw != nil {
		// An entry lives one lease from its last refresh (the waiter
		// refreshes it at least every third of one, see below).
		kw.life.Store(int64(ttl))
		a.wakes = kw.wakes.Load()
		kw.last.Store(a)
		w = &redislua.RedlockWaiter{Member: member, Inbox: d.inbox, Attempt: a.id, Score: kw.place(a.wakes)}
	}
	keys, args := redislua.RedlockAcquireArgs(nm.lock, nm.counter, nm.meta, nm.queue, nm.entries, req.Owner, ttl.Milliseconds(), req.Meta, floor, w)
	pf := d.startFanout(timeout, d.all, request{script: acquireScript, keys: keys, args: args, late: a.answer}, d.quorum, acquired)
	a.answered = pf.g.done
	replies := pf.wait(ctx)
	var (
		won       []int    // instances where the lock is ours
		counters  []uint64 // their counters, same order
		refused   []refusal
		refusedAt []int // the instances that refused, same order
		unknown   int   // no answer (yet): the request may or may not have applied
		firstErr  error
	)
	for _, r := range replies {
		won1, counter, ref, err := parseAcquire(r)
		switch {
		case err != nil:
			unknown++
			if firstErr == nil {
				firstErr = d.instErr(reply{inst: r.inst, err: err})
			}
		case won1:
			won = append(won, r.inst)
			counters = append(counters, counter)
		default:
			refused = append(refused, ref)
			refusedAt = append(refusedAt, r.inst)
		}
	}
	if kw != nil {
		kw.queued.Store(len(refused) > 0)
		if len(won) < d.quorum && len(refused) > 0 {
			d.overtaken(kw, a, refused, refusedAt)
			// Grants whose messages came before these refusals count now.
			d.wakeIfHanded(kw)
		}
	}
	if len(won) < d.quorum {
		if err := ctx.Err(); err != nil {
			a.abandon(ctx, true)
			return driver.Hold{}, err
		}
		if answered := len(won) + len(refused); answered < d.quorum {
			a.abandon(ctx, true)
			return driver.Hold{}, driver.Unavailable(fmt.Errorf(
				"redlock: quorum unreachable: %d of %d instances answered, %d needed: %w",
				answered, len(d.inst), d.quorum, firstErr))
		}
		winner := quorumHolder(refused, d.quorum)
		err := a.refuse(ctx, len(won), refused, winner, time.Since(start))
		var held *driver.HeldError
		if kw != nil && errors.As(err, &held) && (!d.inboxOnAny(refusedAt) || unknown > 0 && !winner) {
			// A release wakes this waiter only where its inbox is
			// subscribed, and it is on none of the instances that refused:
			// its Locker's first wait has not seen them confirm yet, or they
			// came back from an outage. Or no holder has a quorum and some
			// instances did not answer: the lock is split, and what decides
			// it is an instance coming back (empty, after a restart), which
			// nobody announces. Either way, retry soon instead of at the end
			// of the holder's lease.
			held.Remaining = min(held.Remaining, unsubscribedRetry+rand.N(unsubscribedRetry))
			if held.Remaining <= 0 {
				held.Remaining = unsubscribedRetry
			}
		}
		if kw != nil && errors.As(err, &held) {
			// The next attempt refreshes the member's entries before they
			// run out, one lease after this one.
			held.Remaining = min(held.Remaining, max(driver.RenewInterval(ttl), time.Millisecond))
		}
		return driver.Hold{}, err
	}

	token, err := a.fence(ctx, timeout, won, counters)
	if err = a.finish(ctx, start, err, "the quorum answered"); err != nil {
		return driver.Hold{}, err
	}
	return driver.Hold{
		Token: token,
		TTL:   ttl,
		// The portable layer subtracts TTL*0.01 + 2ms from Since + TTL;
		// a larger drift factor moves Since back by the difference.
		Since: start.Add(-d.extraDrift(ttl)),
		State: a,
	}, nil
}

// finish checks the outcome err of a's phase 2 and a's validity window,
// which began at since: when either failed (what says what came past the
// window), it abandons a and returns the error, ctx's when ctx ended.
func (a *attempt) finish(ctx context.Context, since time.Time, err error, what string) error {
	if err == nil {
		if valid := a.ttl - a.d.drift(a.ttl); time.Since(since) >= valid {
			err = driver.Unavailable(fmt.Errorf("redlock: %s after %v, past the validity window of %v",
				what, time.Since(since).Round(time.Millisecond), valid))
		}
	}
	if err != nil {
		a.abandon(ctx, true)
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
	}
	return err
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
func (a *attempt) fence(ctx context.Context, timeout time.Duration, won []int, counters []uint64) (uint64, error) {
	d := a.d
	token := slices.Max(counters)
	if token == 0 { // only if counters were deleted under a held lock
		return 0, driver.Unavailable(errors.New("redlock: every fencing counter read 0"))
	}
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
	fenceKeys, fenceArgs := redislua.FenceArgs(a.lock, a.names().counter, a.owner, token)
	for _, r := range d.fanout(ctx, timeout, behind, request{script: fenceScript,
		keys: fenceKeys, args: fenceArgs},
		d.quorum-written, flagSet) {
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

// refuse handles an attempt that found the key held (winner: one owner
// refused on a quorum, see quorumHolder): it releases what this
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
func (a *attempt) refuse(ctx context.Context, won int, refused []refusal, winner bool, elapsed time.Duration) error {
	d := a.d
	a.abandon(ctx, !winner)

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
	if k := d.quorum - won - 1; k >= 0 && k < len(pttls) {
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

// quorumHolder reports whether one holder refused on at least quorum
// instances: the lock is held, not split.
func quorumHolder(refused []refusal, quorum int) bool {
	perHolder := map[string]int{}
	for _, r := range refused {
		perHolder[r.holder]++
		if perHolder[r.holder] >= quorum {
			return true
		}
	}
	return false
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
