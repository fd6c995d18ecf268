package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// errNoAnswer marks an instance that did not answer within the
// per-instance timeout.
var errNoAnswer = errors.New("no answer within the per-instance timeout")

// request is one script call, sent to several instances.
type request struct {
	script *redis.Script
	keys   []string
	args   []any
}

// reply is one instance's answer to a fanned-out request.
type reply struct {
	inst int // index into Driver.inst
	val  any
	err  error
}

// timeout is the per-instance timeout for a lease of ttl: the configured
// timeout, capped at ttl/10 so that the instances that do answer leave most
// of the lease as validity.
func (d *Driver) timeout(ttl time.Duration) time.Duration {
	t := d.cfg.Timeout
	if ttl > 0 && ttl/10 < t {
		t = max(ttl/10, time.Millisecond)
	}
	return t
}

// fanout sends req to the instances idx at once and returns their replies
// in the order of idx. It returns when every instance has answered or been
// given up on (see batcher): a paused instance delays it by about the
// per-instance timeout at most.
func (d *Driver) fanout(ctx context.Context, timeout time.Duration, idx []int, req request) []reply {
	calls := make([]*call, len(idx))
	for k, i := range idx {
		d.inst[i].requests.Add(1)
		calls[k] = d.inst[i].batch.submit(req, timeout)
	}
	out := make([]reply, len(idx))
	for k, c := range calls {
		in := d.inst[idx[k]]
		r := reply{inst: idx[k]}
		r.val, r.err = in.batch.wait(ctx, c)
		if r.err != nil && ctx.Err() == nil {
			in.errors.Add(1)
			if isTimeout(r.err) {
				in.timeouts.Add(1)
				if !errors.Is(r.err, errNoAnswer) {
					r.err = fmt.Errorf("%w (%v): %w", errNoAnswer, timeout, r.err)
				}
			}
		}
		out[k] = r
	}
	return out
}

func isTimeout(err error) bool {
	if errors.Is(err, errNoAnswer) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// instErr names the instance in a reply's error.
func (d *Driver) instErr(r reply) error {
	return fmt.Errorf("instance %s: %w", d.inst[r.inst].addr, r.err)
}
