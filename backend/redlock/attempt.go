package redlock

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/internal/redislua"
)

// attempt is one acquire attempt and, when it succeeds, the hold.
type attempt struct {
	d *Driver
	// key is the user's key, the Mutex's own string; lock is its lock's
	// name, the one every renewal sends. The other names are made when
	// needed (names): a hold keeps 2 strings, not 8, of which one is new.
	key   string
	lock  string
	owner string
	ttl   time.Duration // the TTL set on the instances, whole milliseconds

	// answers holds what each instance answered to the acquire.
	answers []atomic.Int32
	// member is the line member the attempt was sent for ("" when none),
	// id names it in the entries it refreshes (a grant names the attempt
	// its elapsed time counts from), sent is when it was sent; granted
	// marks the instances whose refusal named member as the holder: a
	// release had handed the lock there to member before this attempt
	// arrived (see claimGrants).
	member  string
	id      string
	sent    time.Time
	granted []atomic.Bool
	// ended is set when the attempt failed or its hold was released.
	ended atomic.Bool
	// wakes is its key's keyWatch.wakes when it was sent.
	wakes uint64
	// answered is closed once every instance answered the acquire (nil
	// for a hold handed over by a release: nothing is out).
	answered <-chan struct{}
}

// What an instance answered to the acquire.
const (
	ansPending int32 = iota // no answer yet
	ansGranted              // the lock is ours there
	ansRefused              // another owner holds it there
	ansUnknown              // an error: the lock may or may not be ours there
	ansNotSent              // the request was never sent
)

func newAttempt(d *Driver, nm names, key, owner string, ttl time.Duration) *attempt {
	// The lock's name and the owner, the two strings every renewal
	// sends, share one allocation: with many holds, each renewal then
	// reads one or two cache lines of them, not two lines far apart.
	both := nm.lock + owner
	return &attempt{d: d, key: key, lock: both[:len(nm.lock)], owner: both[len(nm.lock):], ttl: ttl, answers: make([]atomic.Int32, len(d.inst)),
		granted: make([]atomic.Bool, len(d.inst)), id: strconv.FormatUint(d.attempts.Add(1), 36)}
}

// names are the Redis names of the attempt's key.
func (a *attempt) names() names { return a.d.names(a.key) }

// answer records each instance's answer to the acquire when it arrives,
// also after TryAcquire stopped waiting for it. An answer that arrives
// after the attempt ended, and may have granted the lock, is undone at
// once, after it: a release sent earlier could have overtaken it.
func (a *attempt) answer(inst int, val any, err error) {
	st := ansUnknown
	switch {
	case errors.Is(err, errNotSent) || errors.Is(err, errStalled):
		st = ansNotSent
	case err == nil:
		if won, _, ref, perr := parseAcquire(reply{inst: inst, val: val}); perr == nil {
			st = ansRefused
			if won {
				st = ansGranted
			} else if a.member != "" && ref.holder == a.member {
				a.granted[inst].Store(true)
			}
		}
	}
	a.answers[inst].Store(st)
	if (st == ansGranted || st == ansUnknown) && a.ended.Load() {
		// Queued, not awaited: this runs on the instance's flusher.
		a.d.inst[inst].batch.submit(a.releaseRequest(true), a.d.timeout(a.ttl), newGroup(1, 0, nil))
	}
}

// acquired accepts an acquire reply that granted the lock.
func acquired(val any, err error) bool {
	won, _, _, perr := parseAcquire(reply{val: val, err: err})
	return perr == nil && won
}

// end marks the attempt over and returns the instances to release now:
// those that answered and where the lock is, or may be, ours. Those that
// have not answered are released by answer when they do.
func (a *attempt) end() []int {
	a.ended.Store(true)
	return a.where(func(st int32) bool { return st == ansGranted || st == ansUnknown })
}

// renewable returns the instances where the lock may be ours.
func (a *attempt) renewable() []int { return a.where(renewableAnswer) }

// renewableAnswer says whether an instance that answered st to the acquire
// is one to renew on: all but those that refused or were never asked.
func renewableAnswer(st int32) bool { return st != ansRefused && st != ansNotSent }

// renewableSet is renewable as a bit per instance (instance i is bit i),
// for fewer than 64 instances: RenewBatch groups the holds by it for each
// renewal without making a slice for each.
func (a *attempt) renewableSet() uint64 {
	var m uint64
	for i := range a.answers {
		if renewableAnswer(a.answers[i].Load()) {
			m |= 1 << i
		}
	}
	return m
}

func (a *attempt) where(keep func(int32) bool) []int {
	var idx []int
	for i := range a.answers {
		if keep(a.answers[i].Load()) {
			idx = append(idx, i)
		}
	}
	return idx
}

// releaseRequest is the compare-and-delete of the lock; with publish, it
// hands the lock to the first live member of the instance's wake queue.
func (a *attempt) releaseRequest(publish bool) request {
	return a.d.releaseRequest(a.key, a.owner, publish)
}

// releaseRequest releases key's lock if owner holds it, and removes owner's
// entry from its wake queue; with publish, the freed lock is handed to the
// first live member, with a token floor a little ahead of this client's
// clock (see floorLead): every instance this release reaches then grants
// the same token, and the member needs no phase 2.
func (d *Driver) releaseRequest(key, owner string, publish bool) request {
	announce, floor := redislua.NoPublish, ""
	if publish {
		announce = redislua.Publish
		floor = strconv.FormatInt(time.Now().Add(floorLead).UnixMicro(), 10)
	}
	keys, args := redislua.ReleaseHandoffArgs(d.names(key).queueKeys(), owner, announce, "released", floor)
	return request{script: redislua.Release, keys: keys, args: args}
}

// abandon ends a failed attempt: it releases the lock where it may have
// been taken, in parallel and even when ctx has ended (bounded by the
// per-instance timeout). An instance that never answers keeps the lock
// until its TTL.
func (a *attempt) abandon(ctx context.Context, publish bool) {
	idx := a.end()
	if len(idx) == 0 {
		return
	}
	timeout := a.d.timeout(a.ttl)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	a.d.fanout(cctx, timeout, idx, a.releaseRequest(publish), a.d.quorum, flagSet)
}
