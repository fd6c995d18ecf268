package etcd

import (
	"context"
	"errors"
	"time"

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
// attemptTimeout.
func retry(ctx context.Context, do func(ctx context.Context) error) error {
	for backoff := 25 * time.Millisecond; ; backoff = min(2*backoff, 250*time.Millisecond) {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= attemptTimeout+backoff {
			return do(ctx)
		}
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := do(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(mapErr(ctx, err), driver.ErrUnavailable) {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
	}
}
