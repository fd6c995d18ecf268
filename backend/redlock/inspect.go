package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.Inspector = (*Driver)(nil)

// Inspect asks every instance what it holds for key (one read-only script
// each, in parallel) and reports what a majority says: the key is held
// when one owner holds it on a majority of instances. Its token is the
// counter value on a majority of instances (phase 2 of acquire puts it
// there; while an acquire or a release is in flight, the smallest counter
// of the holder's, which is never above its token), the lease left is the
// majority's shortest (the hold is valid while a majority keeps it), and
// Waiters counts the live entries of the longest wake queue (a waiter
// stands in the queue of every instance that refused it). Fewer than a
// majority of answers is an ErrUnavailable error.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return d.inspect(ctx, key, false)
}

// Break deletes key's lock on every instance, whoever holds it there,
// keeping the counters (so the next token, larger than every counter of a
// majority, is higher than the broken one), and on each wakes the first
// waiter in line (or, with nobody in line, publishes a release for Watch). It returns what a majority held before. The broken holder's next
// renewal finds no majority and reports the loss. An instance that does
// not answer keeps its copy until the lease runs out there, which cannot
// make a majority; fewer than a majority of answers is an ErrUnavailable
// error (the break may then have taken effect on some instances only).
func (d *Driver) Break(ctx context.Context, key string) (driver.Info, error) {
	return d.inspect(ctx, key, true)
}

func (d *Driver) inspect(ctx context.Context, key string, brk bool) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	nm := d.names(key)
	keys, args := redislua.InspectQueueArgs(nm.queueKeys(), brk, redislua.Publish, "released")
	replies := d.fanout(ctx, d.timeout(0), d.all, request{script: redislua.Inspect, keys: keys, args: args}, len(d.all), nil)
	var (
		answered int
		firstErr error
		byOwner  = map[string][]redislua.InspectReply{}
		counters = map[uint64]int{} // counter value -> instances
		waiters  int                // the longest wake queue's live entries
	)
	for _, r := range replies {
		var ir redislua.InspectReply
		err := r.err
		if err == nil {
			ir, err = redislua.ParseInspect(r.val)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = d.instErr(reply{inst: r.inst, err: err})
			}
			continue
		}
		answered++
		waiters = max(waiters, ir.Waiters)
		counters[ir.Counter]++
		if ir.Held {
			byOwner[ir.Owner] = append(byOwner[ir.Owner], ir)
		}
	}
	if err := ctx.Err(); err != nil {
		return driver.Info{}, err
	}
	if answered < d.quorum {
		return driver.Info{}, driver.Unavailable(fmt.Errorf(
			"redlock: quorum unreachable: %d of %d instances answered, %d needed: %w",
			answered, len(d.inst), d.quorum, firstErr))
	}
	for _, rs := range byOwner {
		if len(rs) < d.quorum {
			continue
		}
		info := majorityInfo(rs, counters, d.quorum)
		info.Waiters = waiters
		return info, nil
	}
	return driver.Info{Waiters: waiters}, nil
}

// majorityInfo sums up the replies of the instances where one owner holds
// the key, at least quorum of them. Its token is on a majority of the
// counters (acquire puts it there, and only a later grant on a majority
// moves them past it), whether or not those instances still have the lock;
// while an acquire or a release is in flight, it is the smallest counter of
// the holder's, never above its token.
func majorityInfo(rs []redislua.InspectReply, counters map[uint64]int, quorum int) driver.Info {
	var token uint64
	for c, n := range counters {
		if n >= quorum {
			token = c
		}
	}
	if token == 0 {
		// An acquire or a release is in flight (or an instance came back
		// without its counter): the counters disagree. Every counter of an
		// instance where the lock is still the holder's is the one its
		// grant set, or the token T that phase 2 wrote there; those of the
		// first majority to grant, of which the holder keeps at least one
		// (two majorities meet), are at most T. So the smallest is at most
		// T: a reader is never shown a token above the holder's, neither
		// while its acquire ends nor while its release runs.
		token = rs[0].Counter
		for _, r := range rs[1:] {
			token = min(token, r.Counter)
		}
	}
	left := make([]time.Duration, len(rs))
	for i, r := range rs {
		left[i] = r.Remaining
	}
	slices.Sort(left)
	slices.Reverse(left)
	return driver.Info{Held: true, Token: token, Remaining: left[quorum-1], Meta: rs[0].Meta, Waiters: -1}
}
