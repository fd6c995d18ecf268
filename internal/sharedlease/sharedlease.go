// Package sharedlease is the policy of a lease shared by many holds: one
// server-side lease (an etcd lease, a Consul session) per TTL backs every
// hold of a Locker with that TTL, so that many holds cost one renewal per
// renewal round instead of one each.
//
// The policy, in one place for every store that has such leases:
//
//   - Reuse: a current lease that has used less than a third of its TTL
//     since its last renewal backs a new hold as it is (Fresh), so a new
//     hold has at least two thirds of the TTL ahead.
//   - Refresh: an older one that has used less than three quarters of its
//     TTL (Renewable) is renewed first, then backs the new hold.
//   - Replace: one older still, found gone, or whose renewal fails while
//     the caller's context still runs, is replaced by a newly granted lease.
//   - One grant at a time: the refreshes and grants of a Pool take turns,
//     and each caller looks again at the current lease once it has its
//     turn, so callers that find no usable lease together are granted
//     one new lease, not one each.
//   - Sweep: each hold keeps its own validity end, the one it would have
//     on a lease of its own (Holds); before every renewal of a shared
//     lease, the holds whose validity has ended are swept (Holds.Expired),
//     so that the renewal that serves the others does not keep them too.
//
// What a store does to renew, grant, sweep or retire a lease stays in its
// backend, behind Store.
package sharedlease

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Fresh reports whether a lease whose TTL ttl began to run at since is
// young enough at now to back a new hold without a renewal: less of its
// TTL used than the renewal interval (driver.RenewInterval), so that a hold
// joining it is renewed with it at the lease's next renewal, not before
// its own first renewal would have been due.
func Fresh(since time.Time, ttl time.Duration, now time.Time) bool {
	return now.Sub(since) < driver.RenewInterval(ttl)
}

// Renewable reports whether a lease whose TTL ttl began to run at since is
// still worth renewing at now, rather than replacing: less than three
// quarters of its TTL used.
func Renewable(since time.Time, ttl time.Duration, now time.Time) bool {
	return now.Sub(since) < ttl*3/4
}

// Store is what a Pool needs of a store's shared leases. K names the
// bucket of a lease (its requested TTL); L is a lease, comparable, with
// the zero L for none.
type Store[K comparable, L comparable] interface {
	// Current returns the current shared lease of key, the zero L if
	// none, or an error that ends Get (the Locker is closed).
	Current(key K) (L, error)
	// Clock returns when l's TTL began to run and how long it runs.
	Clock(l L) (since time.Time, ttl time.Duration)
	// Use counts one more user of l, and reports false (counting none)
	// if l is known to be gone.
	Use(l L) bool
	// Refresh sweeps l (see Holds.Expired) and renews it once. It
	// returns an error if the renewal failed; a store may instead report
	// a lease it found gone by Use refusing it afterwards.
	Refresh(ctx context.Context, l L) error
	// Replace grants a new lease for key and makes it key's current
	// lease, with one user counted, in place of old (the zero L if
	// none).
	Replace(ctx context.Context, key K, old L) (L, error)
}

// Pool hands out a store's shared leases under the policy (see the
// package documentation). Its zero value is not usable; call New.
type Pool[K comparable, L comparable] struct {
	store Store[K, L]
	turn  chan struct{} // one refresh or grant at a time
	now   func() time.Time
}

// New returns a Pool over store.
func New[K comparable, L comparable](store Store[K, L]) *Pool[K, L] {
	return &Pool[K, L]{store: store, turn: make(chan struct{}, 1), now: time.Now}
}

// Get returns the shared lease of key, counting one more user of it: the
// current one as it is if it is fresh, else, in the pool's grant turn,
// the current one renewed if it is still renewable and renews, else a new
// one.
func (p *Pool[K, L]) Get(ctx context.Context, key K) (L, error) {
	var none L
	for {
		l, err := p.store.Current(key)
		if err != nil {
			return none, err
		}
		if l != none && p.fresh(l) && p.store.Use(l) {
			return l, nil
		}
		select {
		case p.turn <- struct{}{}:
		case <-ctx.Done():
			return none, ctx.Err()
		}
		nl, ok, err := p.renewOrReplace(ctx, key, l)
		<-p.turn
		if ok || err != nil {
			return nl, err
		}
		// Another caller renewed or replaced it meanwhile: look again.
	}
}

// renewOrReplace, in the grant turn, renews the current lease seen (l) or
// replaces it, and returns it with one more user. It reports false if the
// current lease is no longer l.
func (p *Pool[K, L]) renewOrReplace(ctx context.Context, key K, l L) (L, bool, error) {
	var none L
	cur, err := p.store.Current(key)
	if err != nil || cur != l {
		return none, false, err
	}
	if l != none {
		since, ttl := p.store.Clock(l)
		if Renewable(since, ttl, p.now()) {
			err := p.store.Refresh(ctx, l)
			switch {
			case err == nil && p.store.Use(l):
				return l, true, nil
			case err != nil && ctx.Err() != nil:
				return none, false, err
			}
			// Gone, or not renewable now: a new lease replaces it.
		}
	}
	nl, err := p.store.Replace(ctx, key, l)
	if err != nil {
		return none, false, err
	}
	return nl, true, nil
}

func (p *Pool[K, L]) fresh(l L) bool {
	since, ttl := p.store.Clock(l)
	return Fresh(since, ttl, p.now())
}

// Holds is the holds on one shared lease, each with the instant its own
// validity ends: the one it would have on a lease of its own. It is not
// safe for concurrent use: the lease's own lock guards it. A nil Holds
// reads as empty; Track needs a non-nil one.
type Holds[H comparable] map[H]time.Time

// Track records that h is on the lease, valid until until.
func (hs Holds[H]) Track(h H, until time.Time) { hs[h] = until }

// Extend moves h's validity end to until, and reports false (doing
// nothing) if h is no longer tracked: swept, or its lease found gone.
func (hs Holds[H]) Extend(h H, until time.Time) bool {
	if _, ok := hs[h]; !ok {
		return false
	}
	hs[h] = until
	return true
}

// Validity returns the instant h's own validity ends, and whether h is
// still tracked.
func (hs Holds[H]) Validity(h H) (time.Time, bool) {
	until, ok := hs[h]
	return until, ok
}

// Untrack forgets h (released, or lost), and reports whether it was
// tracked.
func (hs Holds[H]) Untrack(h H) bool {
	_, ok := hs[h]
	delete(hs, h)
	return ok
}

// Expired returns the holds whose own validity has ended at now, and
// forgets them: nobody renewed them in time (their owner stopped renewing,
// with autorenew off or a watchdog that gave up), and on a lease of their
// own they would have expired on the server. A store sweeps them before
// it renews the lease.
func (hs Holds[H]) Expired(now time.Time) []H {
	var out []H
	for h, until := range hs {
		if !now.Before(until) {
			out = append(out, h)
			delete(hs, h)
		}
	}
	return out
}
