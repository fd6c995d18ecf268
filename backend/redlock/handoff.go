package redlock

import (
	"context"
	"strconv"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

// handed is one instance's grant of a lock to a waiting member, as its
// release told it (redislua.ParseGrant): the release set the lock to the
// member with Token, Elapsed (server time) after the member's last refresh
// of its entry there, which the attempt named Attempt made.
type handed = redislua.Granted

// handed records a grant that instance inst's release made to a member of
// this Driver, and wakes the member's watches once grants from a majority
// can make a hold, or after a grace period when they cannot yet (see
// claimGrants). A grant to a member nobody here waits as any more is
// handed on at once: that member's release gives the lock to the next one
// in line there.
func (d *Driver) handed(inst int, g handed) {
	d.mu.Lock()
	defer d.mu.Unlock()
	kw := d.members[g.Member]
	if kw == nil {
		e, ok := d.ended[g.Member]
		if ok && e.last != nil && e.last.owner == g.Member && !e.last.ended.Load() {
			// The member holds the lock, made of the grants that came
			// first: this one is part of it (its renewals and its release
			// go to every instance).
			return
		}
		if ok && !d.isClosed {
			// Queued, not awaited: this runs on the hub's reader.
			d.inst[inst].batch.submit(d.leaveRequest(e.key, g.Member), d.timeout(0), newGroup(1, 0, nil))
		}
		return
	}
	if kw.grants == nil {
		kw.grants = make([]*handed, len(d.inst))
	}
	kw.grants[inst] = &g
	if _, n := kw.claimable(); n >= d.quorum {
		kw.stopGrace()
		kw.wake()
		return
	}
	if kw.grace == nil {
		// Two per-instance timeouts: the other instances' releases were
		// sent with this one's, and each has a timeout to be answered.
		grace := 2 * d.timeout(time.Duration(kw.life.Load()))
		var t *time.Timer
		t = time.AfterFunc(grace, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if kw.grace == t {
				kw.grace = nil
			}
			kw.wake()
		})
		kw.grace = t
	}
}

// wakeIfHanded wakes kw's watches when grants from a majority can make a
// hold.
func (d *Driver) wakeIfHanded(kw *keyWatch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, n := kw.claimable(); n >= d.quorum {
		kw.stopGrace()
		kw.wake()
	}
}

// stopGrace stops kw's grace timer. d.mu is held.
func (kw *keyWatch) stopGrace() {
	if kw.grace != nil {
		kw.grace.Stop()
		kw.grace = nil
	}
}

// claimable returns the instances whose grant to kw's member can count
// towards a hold, and how many: the grant names the member's last attempt
// as the one whose refresh its elapsed time counts from, so that attempt's
// sending is where the window may start. A grant that names an earlier
// attempt counts from a refresh sent earlier, which the waiter no longer
// pairs it with: it is given back (it may well have run out, and the lock
// be someone else's since). An instance whose answer has not come, or that
// named the member as its holder, does not count either. d.mu is held.
func (kw *keyWatch) claimable() ([]int, int) {
	a := kw.last.Load()
	if a == nil || a.member != kw.member {
		return nil, 0
	}
	var idx []int
	for i, g := range kw.grants {
		if g != nil && g.Attempt == a.id && a.answers[i].Load() == ansRefused && !a.granted[i].Load() {
			idx = append(idx, i)
		}
	}
	return idx, len(idx)
}

// claimGrants turns the grants that releases made to kw's member into a
// hold when a majority of instances made one: no request is sent when they
// all granted the same token, else phase 2 raises the others to the
// largest, as for an attempt. The hold's window starts when the member's
// last attempt was sent plus the shortest time a grant reports from the
// refresh to the grant, less the clock-rate allowance: each lease was set
// at its grant, which came that long after a refresh that ran after the
// attempt was sent. ok is false when there is no such majority; grants
// that came then are given back (each instance's release hands the lock to
// the next member in line there) and kw waits on as a new member, so that a
// grant to the old one still on its way is handed on too (see handed).
// Either way member is the member the next attempt is to send.
func (d *Driver) claimGrants(ctx context.Context, kw *keyWatch, ttl time.Duration) (h driver.Hold, ok bool, member string, err error) {
	d.mu.Lock()
	if kw.formed.Load() {
		// The member holds the lock already (a hold this Driver made of its
		// grants, for another caller than the waiting Lock): attempt as
		// any other owner would, and be refused.
		member = kw.member
		d.mu.Unlock()
		return driver.Hold{}, false, member, nil
	}
	idx, n := kw.claimable()
	grants := kw.grants
	kw.grants = nil
	kw.stopGrace()
	if n >= d.quorum {
		d.mu.Unlock()
		h, err := d.holdFromGrants(ctx, kw, ttl, idx, grants)
		if err == nil {
			return h, true, "", nil
		}
		if ctx.Err() != nil {
			return driver.Hold{}, true, "", err
		}
		d.mu.Lock()
	}
	old := kw.member
	var back []int
	last := kw.last.Load()
	for i := range d.inst {
		if grants != nil && grants[i] != nil || last != nil && last.granted[i].Load() {
			back = append(back, i)
		}
	}
	if len(back) > 0 {
		// Wait on as a new member, in the same place in line.
		delete(d.members, old)
		kw.stopGrace()
		d.remember(old, endedMember{key: kw.key, until: time.Now().Add(time.Duration(kw.life.Load()))})
		d.seq++
		kw.member = d.inbox + "." + strconv.FormatUint(d.seq, 36)
		d.members[kw.member] = kw
	}
	member = kw.member
	d.mu.Unlock()
	if len(back) > 0 {
		// Every instance, not only those heard from: the old member may
		// stand in line, or hold a grant whose message is still on its way,
		// anywhere.
		timeout := d.timeout(ttl)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		d.fanout(cctx, timeout, d.all, d.leaveRequest(kw.key, old), len(d.all), nil)
		cancel()
	}
	return driver.Hold{}, false, member, nil
}

// holdFromGrants makes the hold of kw's member from the grants of the
// instances idx.
func (d *Driver) holdFromGrants(ctx context.Context, kw *keyWatch, ttl time.Duration, idx []int, grants []*handed) (driver.Hold, error) {
	last := kw.last.Load()
	a := newAttempt(d, d.names(kw.key), kw.key, last.member, ttl)
	a.member, a.sent = last.member, last.sent
	credit := time.Duration(-1)
	counters := make([]uint64, len(idx))
	for i := range a.answers {
		a.answers[i].Store(ansUnknown) // released at the end, in case a grant is on its way
	}
	for k, i := range idx {
		a.answers[i].Store(ansGranted)
		counters[k] = grants[i].Token
		c := grants[i].Elapsed - grants[i].Elapsed/100 - time.Millisecond
		if credit < 0 || c < credit {
			credit = c
		}
	}
	kw.last.Store(a)
	// The member leaves no queue when its wait ends: its grants on the
	// instances not counted may still come, and the hold's release clears
	// every instance.
	kw.queued.Store(false)
	since := last.sent.Add(max(credit, 0))
	if now := time.Now(); since.After(now) {
		since = now
	}
	token, err := a.fence(ctx, d.timeout(ttl), idx, counters)
	if err = a.finish(ctx, since, err, "the grants were claimed"); err != nil {
		return driver.Hold{}, err
	}
	kw.formed.Store(true)
	return driver.Hold{Token: token, TTL: ttl, Since: since.Add(-d.extraDrift(ttl)), State: a}, nil
}
