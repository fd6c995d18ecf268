package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/redislua"
)

// errNoAnswer marks an instance that did not answer within the
// per-instance timeout.
var errNoAnswer = errors.New("no answer within the per-instance timeout")

// errNotAwaited marks an instance whose reply was not needed: a majority
// had already answered.
var errNotAwaited = errors.New("reply not awaited: a majority answered first")

// request is one script call, sent to several instances.
type request struct {
	script *redis.Script
	keys   []string
	args   []any
	// late, when set, sees every instance's answer when it arrives, also
	// after the caller stopped waiting for it.
	late func(inst int, val any, err error)
	// wire, when set, is the whole EVALSHA command line of script, keys
	// and args, built once for every instance the request goes to (keys
	// and args are then nil; see unit.send).
	wire []any
}

// keyCount is how many keys the request names.
func (r request) keyCount() int {
	if r.wire != nil {
		return r.wire[2].(int)
	}
	return len(r.keys)
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
// given up on (see batcher), so a paused instance delays it by about the
// per-instance timeout at most; or, when ok is not nil, as soon as need
// instances answered with a reply ok accepts. The requests not answered by
// then are still sent and run; their replies are not awaited
// (errNotAwaited in the result).
func (d *Driver) fanout(ctx context.Context, timeout time.Duration, idx []int, req request,
	need int, ok func(any, error) bool) []reply {
	return d.startFanout(timeout, idx, req, need, ok).wait(ctx)
}

// pendingFanout is a fan-out whose requests are queued; wait collects the
// replies. Starting many fan-outs before waiting on any (RenewBatch) puts
// all their requests in the same pipelines.
type pendingFanout struct {
	d         *Driver
	timeout   time.Duration
	idx       []int
	g         *group
	submitted time.Time
	calls     []*call
}

// startFanout queues req for the instances idx and returns at once.
func (d *Driver) startFanout(timeout time.Duration, idx []int, req request, need int, ok func(any, error) bool) *pendingFanout {
	p := &pendingFanout{d: d, timeout: timeout, idx: idx}
	if len(idx) == 0 {
		return p
	}
	if req.wire == nil && req.script != redislua.Renew && len(idx) > 1 {
		// Box the keys and arguments once for every instance, not once
		// per instance's EVALSHA. Single renewals keep keys and args: a
		// pipeline folds them into one RenewMany.
		req.wire, req.keys, req.args = redislua.ScriptCall(req.script, req.keys, req.args).Line(), nil, nil
	}
	p.g = newGroup(len(idx), need, ok)
	p.submitted = time.Now()
	p.calls = make([]*call, len(idx))
	for k, i := range idx {
		p.calls[k] = d.inst[i].batch.submit(req, timeout, p.g)
	}
	return p
}

// wait is the second half of fanout.
func (p *pendingFanout) wait(ctx context.Context) []reply {
	d, timeout, idx, g, submitted, calls := p.d, p.timeout, p.idx, p.g, p.submitted, p.calls
	if len(idx) == 0 {
		return nil
	}
	out := make([]reply, len(idx))
	for k := range out {
		out[k] = reply{inst: idx[k], err: errNoAnswer}
	}
	given := make([]bool, len(idx)) // given up on
	early := false
	t := time.NewTimer(timeout)
	defer t.Stop()
wait:
	for {
		select {
		case <-g.done:
			break wait
		case <-g.enough: // nil, blocking, when not ending early
			early = true
			break wait
		case <-ctx.Done():
			break wait
		case <-t.C:
		}
		now := time.Now()
		var next time.Time
		open := false
		for k, c := range calls {
			if given[k] || c.answered() {
				continue
			}
			over, when := d.inst[idx[k]].batch.expired(c, submitted, now)
			if over {
				given[k] = true
				c.dropped.Store(dropStalled)
				continue
			}
			open = true
			if next.IsZero() || when.Before(next) {
				next = when
			}
		}
		if !open {
			break
		}
		t.Reset(next.Sub(now))
	}
	for k, c := range calls {
		r := &out[k]
		switch {
		case c.answered():
			r.val, r.err = c.val, c.err
		case early:
			r.err = errNotAwaited
		case given[k]:
			r.err = fmt.Errorf("%w (%v)", errNoAnswer, timeout)
		case ctx.Err() != nil:
			c.dropped.Store(dropEnded)
			r.err = ctx.Err()
		}
		if r.err != nil && isTimeout(r.err) && ctx.Err() == nil && !errors.Is(r.err, errNoAnswer) {
			r.err = fmt.Errorf("%w (%v): %w", errNoAnswer, timeout, r.err)
		}
	}
	return out
}

func isTimeout(err error) bool {
	if err == nil {
		return false // before errors.As, whose target escapes: no allocation per reply
	}
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
