// Package gate bounds how many operations of one client may have requests
// on its store at once.
//
// A store that serves one client's requests in order (a ZooKeeper session)
// or through one queue of proposals (etcd's Raft log) answers what keeps
// the client's holds alive (a heartbeat, a keepalive's confirmation) only
// after what was sent before it. A burst of thousands of acquisitions on
// one Locker then starves those answers, and the Locker gives up holds
// the store never took from it. A driver takes a Turn for each
// acquisition while its requests are in flight, and gives it up while it
// only waits (for the entry before its own, say), so that at most a gate's
// size of operations stand in front of those answers. Releases come no
// faster than the acquisitions that made their holds; a driver holds them
// back too only where a release that waits cannot lose its hold (the
// portable layer stops renewing a hold before it releases it).
package gate

import (
	"context"

	"github.com/dlock-go/dlock/driver"
)

// Acquires is the bound on one Locker's acquire attempts in flight that
// the drivers use (each driver's maxInFlight says why it needs one):
// enough that a busy Locker's attempts still fill a pipeline or a pool of
// connections, few enough that what keeps its holds alive waits behind at
// most that many. A burst of 5,000 Locks through one Locker cost it holds
// or Locks without a bound on every backend that has one now
// (conformance.BurstKeepsHolds). PostgreSQL's gate is its pool's size.
const Acquires = 64

// Gate admits at most its capacity of operations at a time.
type Gate chan struct{}

// New returns a gate of n turns.
func New(n int) Gate { return make(Gate, n) }

// Turn is one operation's place in a Gate. It is not safe for concurrent
// use: one operation, one goroutine.
type Turn struct {
	g    Gate
	held bool
}

// Enter waits for a turn in g, until ctx ends (its error is returned) or
// closed is closed (driver.ErrClosed); closed may be nil.
func (g Gate) Enter(ctx context.Context, closed <-chan struct{}) (*Turn, error) {
	t := &Turn{g: g}
	return t, t.Again(ctx, closed)
}

// Again takes the turn back after Leave, as Enter does; it does nothing
// while the turn is held.
func (t *Turn) Again(ctx context.Context, closed <-chan struct{}) error {
	if t.held {
		return nil
	}
	select {
	case t.g <- struct{}{}:
		t.held = true
		return nil
	default:
	}
	select {
	case t.g <- struct{}{}:
		t.held = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return driver.ErrClosed
	}
}

// Leave gives the turn up; it may be called more than once.
func (t *Turn) Leave() {
	if t.held {
		t.held = false
		<-t.g
	}
}
