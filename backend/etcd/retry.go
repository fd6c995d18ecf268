package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/dlock-go/dlock/driver"
)

// attemptTimeout bounds one attempt of a request that is safe to send
// again. A member that lost its leader holds requests until etcd's own
// request timeout (about 7s), long after a new leader is elected (1-2s);
// bounding the attempt and sending it again reaches the new leader.
const attemptTimeout = time.Second

// retry runs do, a request that is safe to repeat (a guarded delete, a
// read, a keepalive), until it succeeds, fails for a reason other than
// unavailability, or ctx ends. Each attempt but the last is bounded by
// attemptTimeout. Two unavailabilities are not tried again: a keepalive
// of a retired lease (see lease.retired), which never extends anything,
// and a closed driver.
func retry(ctx context.Context, do func(ctx context.Context) error) error {
	for backoff := 25 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= attemptTimeout+backoff {
			return do(ctx)
		}
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := do(actx)
		cancel()
		if err == nil || ctx.Err() != nil || errors.Is(err, errRetired) || errors.Is(err, driver.ErrClosed) ||
			!errors.Is(mapErr(ctx, err), driver.ErrUnavailable) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
	}
}

// leaderWait bounds how long onLeader re-sends a request that members refuse
// for want of a leader: about an election, not an outage.
const leaderWait = 3 * time.Second

// noLeader reports whether a member refused a request because it has no
// leader. Every call the driver makes carries etcd's require-leader flag
// (see enter), so a member cut off from its peers says so at once and
// applies nothing, instead of holding the request for etcd's request timeout
// (about 7s) and then giving an answer that does not say whether it was
// applied.
func noLeader(err error) bool {
	return errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrGRPCNoLeader)
}

// onLeader runs do, a request that is not safe to repeat in general, again
// while a member refuses it for want of a leader: such a refusal applied
// nothing, and the client sends the next attempt to the next member. It
// gives up after leaderWait, or when ctx ends.
func onLeader(ctx context.Context, do func(ctx context.Context) error) error {
	deadline := time.Now().Add(leaderWait)
	for backoff := 5 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
		err := do(ctx)
		if !noLeader(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
	}
}
