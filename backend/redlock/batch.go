package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatches is how many pipelines may be in flight to one instance at once.
// More than one, so that a caller never waits for another's round trip
// when connections are free; few, so that concurrent callers share
// pipelines instead of queueing for pooled connections one command each.
const maxBatches = 4

// batcher multiplexes the requests of concurrent callers to one instance
// into pipelines, as the Redlock algorithm asks ("multiplexing"): a burst of
// a thousand acquires costs a few round trips per instance, not a thousand
// round trips through a pool of a few connections. Flushing goroutines
// start on demand and exit when the queue is empty.
//
// The per-instance timeout runs from the moment a request is sent, so that
// a busy client does not mistake its own queue for a slow instance; a
// request still queued when its timeout would have ended gives up if the
// instance has left a pipeline unanswered for longer than the timeout (it
// is paused or cut off), so a stalled instance never delays a caller by
// more than about the timeout.
type batcher struct {
	client *redis.Client

	mu       sync.Mutex
	queue    []*call
	flushers int
	inflight [maxBatches]time.Time // send time of each flusher's pipeline, busy when it has none, zero when no flusher
}

// busy marks a flusher that has no pipeline out: it is never stalled.
var busy = time.Unix(1<<40, 0)

// call is one request to one instance.
type call struct {
	req     request
	timeout time.Duration
	sent    atomic.Int64 // UnixNano when its pipeline was sent; 0 while queued
	dropped atomic.Bool  // the caller gave up before it was sent
	val     any
	err     error
	done    chan struct{} // closed once val and err are set
}

// submit queues req and returns at once; wait collects the answer.
func (b *batcher) submit(req request, timeout time.Duration) *call {
	c := &call{req: req, timeout: timeout, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	slot := -1
	if b.flushers < maxBatches {
		b.flushers++
		for i, t := range b.inflight {
			if t.IsZero() {
				slot = i
				b.inflight[i] = busy
				break
			}
		}
	}
	b.mu.Unlock()
	if slot >= 0 {
		go b.flush(slot)
	}
	return c
}

// wait returns c's answer, ctx's error, or errNoAnswer once c has been
// out for its timeout (or queued that long behind a stalled instance).
func (b *batcher) wait(ctx context.Context, c *call) (any, error) {
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
		case <-t.C:
		}
		select {
		case <-c.done:
			return c.val, c.err
		default:
		}
		if ctx.Err() != nil {
			c.dropped.Store(true)
			return nil, ctx.Err()
		}
		now := time.Now()
		if sent := c.sent.Load(); sent != 0 {
			left := time.Unix(0, sent).Add(c.timeout).Sub(now)
			if left <= 0 {
				return nil, errNoAnswer
			}
			t.Reset(left)
			continue
		}
		if b.stalled(now, c.timeout) {
			c.dropped.Store(true)
			return nil, errNoAnswer
		}
		t.Reset(max(c.timeout/8, time.Millisecond))
	}
}

// stalled reports whether a pipeline has been unanswered for longer than
// timeout.
func (b *batcher) stalled(now time.Time, timeout time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.inflight {
		if !t.IsZero() && now.Sub(t) > timeout { // busy is in the future
			return true
		}
	}
	return false
}

func (b *batcher) flush(slot int) {
	for {
		b.mu.Lock()
		batch := b.queue
		b.queue = nil
		if len(batch) == 0 {
			b.flushers--
			b.inflight[slot] = time.Time{}
			b.mu.Unlock()
			return
		}
		now := time.Now()
		b.inflight[slot] = now
		b.mu.Unlock()
		b.exec(batch, now)
		b.mu.Lock()
		b.inflight[slot] = busy
		b.mu.Unlock()
	}
}

// exec sends one pipeline.
func (b *batcher) exec(batch []*call, now time.Time) {
	live := batch[:0]
	timeout := time.Duration(0)
	for _, c := range batch {
		if c.dropped.Load() {
			continue // never sent: nothing to clean up
		}
		c.sent.Store(now.UnixNano())
		timeout = max(timeout, c.timeout)
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmds := b.pipeline(ctx, live, (*redis.Script).EvalSha)
	var retry []*call
	for k, c := range live {
		if redis.HasErrorPrefix(cmds[k].Err(), "NOSCRIPT") {
			retry = append(retry, c)
			continue
		}
		c.val, c.err = cmds[k].Result()
		close(c.done)
	}
	if len(retry) == 0 {
		return
	}
	// First use of a script on this instance (or after a restart): send
	// the source, which also loads it for next time.
	cmds = b.pipeline(ctx, retry, (*redis.Script).Eval)
	for k, c := range retry {
		c.val, c.err = cmds[k].Result()
		close(c.done)
	}
}

func (b *batcher) pipeline(ctx context.Context, calls []*call,
	send func(*redis.Script, context.Context, redis.Scripter, []string, ...any) *redis.Cmd) []*redis.Cmd {
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for k, c := range calls {
		cmds[k] = send(c.req.script, ctx, pipe, c.req.keys, c.req.args...)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own error
	return cmds
}
