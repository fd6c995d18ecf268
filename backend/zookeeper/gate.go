package zookeeper

import (
	"context"

	"github.com/dlock-go/dlock/driver"
)

// maxInFlight bounds the acquisitions and releases of one connection that
// may have requests on the server at once.
//
// ZooKeeper answers a session's requests in the order they were sent, so
// the monitor's heartbeat (a sync and a read, see monitor) is answered
// only after every request queued before it. A burst of acquisitions on
// one Locker, each a create, an exists and a listing, put thousands of
// requests ahead of it: with 1,000 Locks at once on a 2s session, the
// heartbeats went unanswered for longer than half the session timeout,
// and every hold of the Locker was given up, though the server heard from
// the session all along; with 5,000, the grants themselves could not
// confirm the session and the Locks failed (TestBurstKeepsHolds). Past
// maxInFlight, an acquisition or release waits here for its turn, so at
// most a few hundred requests stand before a heartbeat. A waiter does not
// keep its turn while it waits for the node before its own to go.
const maxInFlight = 64

// gate admits at most maxInFlight operations at a time.
type gate chan struct{}

func newGate() gate { return make(gate, maxInFlight) }

// turn is one operation's place in the gate.
type turn struct {
	g    gate
	held bool
}

// enter waits for a turn in g, until ctx ends or closed is closed.
func (g gate) enter(ctx context.Context, closed <-chan struct{}) (*turn, error) {
	t := &turn{g: g}
	return t, t.again(ctx, closed)
}

// again takes a turn back after leave.
func (t *turn) again(ctx context.Context, closed <-chan struct{}) error {
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

// leave gives the turn up; it may be called more than once.
func (t *turn) leave() {
	if t.held {
		t.held = false
		<-t.g
	}
}
