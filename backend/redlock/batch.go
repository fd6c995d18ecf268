package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/redislua"
)

// maxBatches is how many pipelines may be in flight to one instance at once.
// More than one, so that a caller never waits for another's round trip
// when connections are free; few, so that concurrent callers share
// pipelines instead of queueing for pooled connections one command each.
const maxBatches = 4

// maxPipeline bounds the requests in one pipeline. A burst (the renewals
// of many holds falling due together) goes out as several pipelines, so
// that the instance never has more than maxBatches*maxPipeline requests of
// this client to work through ahead of a new one, and no pipeline takes
// the instance longer than a per-instance timeout to answer.
const maxPipeline = 256

// flusherLinger is how long a flushing goroutine with nothing to send
// waits for the next request before it exits. A flusher that goes on to
// the next request keeps the stack it grew inside go-redis; one started
// per request grew it again every time, which cost the client a tenth of
// its CPU on an uncontended Lock+Unlock loop.
const flusherLinger = time.Second

// batcher multiplexes the requests of concurrent callers to one instance
// into pipelines, as the Redlock algorithm asks ("multiplexing"): a burst of
// a thousand acquires costs a few round trips per instance, not a thousand
// round trips through a pool of a few connections. Flushing goroutines
// start on demand, wait flusherLinger for more work when the queue is
// empty, and exit then, or when the Driver closes.
//
// The per-instance timeout runs from the moment a request is sent, so that
// a busy client does not mistake its own queue for a slow instance; a
// request still queued when its timeout would have ended gives up if the
// instance has left a pipeline unanswered for longer than the timeout (it
// is paused or cut off), so a stalled instance never delays a caller by
// more than about the timeout.
type batcher struct {
	client *redis.Client
	in     *instance // its counters
	index  int       // its index in Driver.inst

	mu       sync.Mutex
	relief   []*call // releases: always sent first (see take)
	queue    []*call // acquires, reads: sent next, unless renewals are overdue
	bulk     []*call // renewals: the room other requests leave (see take)
	flushers int
	parked   int                   // flushers waiting for work, each woken by one value sent on wake
	wake     chan struct{}         // capacity maxBatches; made by submit
	inflight [maxBatches]time.Time // send time of each flusher's pipeline, busy when it has none, zero when no flusher
	idle     chan struct{}         // when not nil, closed once no flusher runs

	life    context.Context // the driver's, cancelled by Close: ends a warm
	warming atomic.Bool     // a warm is running
	warmers sync.WaitGroup
}

// warmTimeout bounds the background connection set up by warm.
const warmTimeout = 5 * time.Second

// warm opens a connection to the instance in the background after a
// request ran out of its per-instance timeout, and leaves it in the pool.
// go-redis sets a new connection up (HELLO, CLIENT SETINFO: round trips of
// their own) inside the context of the first request that uses it, so on a
// link whose round trip is a fair part of the timeout every request would
// time out during the set-up, its connection would be dropped, and no
// request would ever be answered. The PING that warms a connection has a
// deadline of its own; the next requests find the connection ready.
func (b *batcher) warm() {
	if !b.warming.CompareAndSwap(false, true) {
		return
	}
	b.warmers.Add(1)
	go func() {
		defer b.warmers.Done()
		defer b.warming.Store(false)
		ctx, cancel := context.WithTimeout(b.life, warmTimeout)
		defer cancel()
		_ = b.client.Ping(ctx).Err()
	}()
}

// busy marks a flusher that has no pipeline out: it is never stalled.
var busy = time.Unix(1<<40, 0)

// call is one request to one instance.
type call struct {
	req     request
	b       *batcher
	timeout time.Duration
	group   *group
	queued  time.Time    // when a renewal was queued (bulk only)
	sent    atomic.Int64 // UnixNano when its pipeline was sent; 0 while queued
	dropped atomic.Int32 // why the caller gave up before it was sent: a drop* value
	val     any
	err     error
	done    chan struct{} // closed once val and err are set
}

// Reasons to drop a call that has not been sent.
const (
	keep        = iota
	dropStalled // queued behind a pipeline the instance left unanswered
	dropEnded   // the caller's context ended
)

// The answers of calls dropped before they were sent: their caller's
// context ended (not the instance's fault), or they were queued behind a
// pipeline the instance left unanswered (a timeout of the instance).
var (
	errNotSent = errors.New("not sent: the caller's context ended first")
	errStalled = fmt.Errorf("%w: not sent, queued behind a request the instance left unanswered", errNoAnswer)
)

// group is the calls of one fan-out: the caller is woken once, when the
// last of them is answered, or as soon as enough of them succeeded, rather
// than once per instance.
type group struct {
	pending atomic.Int32
	done    chan struct{} // closed when every call is answered

	// For fan-outs that may end early: enough is closed when need calls
	// answered with a reply that ok accepts.
	ok     func(val any, err error) bool
	need   int32
	got    atomic.Int32
	enough chan struct{}
}

func newGroup(n int, need int, ok func(any, error) bool) *group {
	g := &group{done: make(chan struct{})}
	g.pending.Store(int32(n))
	if ok != nil {
		g.ok, g.need, g.enough = ok, int32(need), make(chan struct{})
	}
	return g
}

// finish records c's answer, counts it in the instance's counters, and
// lets the request's late hook see it.
func (c *call) finish(val any, err error) {
	c.val, c.err = val, err
	close(c.done)
	if err != nil && !errors.Is(err, errNotSent) {
		c.b.in.errors.Add(1)
		if isTimeout(err) {
			c.b.in.timeouts.Add(1)
		}
	}
	if c.req.late != nil {
		c.req.late(c.b.index, val, err)
	}
	g := c.group
	if g.ok != nil && g.ok(val, err) && g.got.Add(1) == g.need {
		close(g.enough)
	}
	if g.pending.Add(-1) == 0 {
		close(g.done)
	}
}

func (c *call) answered() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// submit queues req and returns at once; the caller waits on g.
func (b *batcher) submit(req request, timeout time.Duration, g *group) *call {
	b.in.requests.Add(1)
	c := &call{req: req, b: b, timeout: timeout, group: g, done: make(chan struct{})}
	b.mu.Lock()
	b.enqueue(c)
	slot := -1
	if b.parked > 0 {
		// Never blocks: one value per parked flusher, and wake holds
		// maxBatches.
		b.parked--
		b.wake <- struct{}{}
	} else if b.flushers < maxBatches {
		if b.wake == nil {
			b.wake = make(chan struct{}, maxBatches)
		}
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

// expired reports whether the caller should stop waiting for c at now:
// it has been out for its timeout, or it is still queued behind a pipeline
// the instance has left unanswered for longer than that. Otherwise it
// returns when to look again.
func (b *batcher) expired(c *call, submitted, now time.Time) (bool, time.Time) {
	if sent := c.sent.Load(); sent != 0 {
		end := time.Unix(0, sent).Add(c.timeout)
		return !now.Before(end), end
	}
	if end := submitted.Add(c.timeout); now.Before(end) {
		return false, end
	}
	if b.stalled(now, c.timeout) {
		return true, time.Time{}
	}
	return false, now.Add(max(c.timeout/8, time.Millisecond))
}

// drain waits until no request is queued or in flight and every flusher
// has exited, or until deadline. Parked flushers exit only once b.life has
// ended: Close ends it first.
func (b *batcher) drain(deadline time.Time) {
	b.mu.Lock()
	if b.flushers == 0 {
		b.mu.Unlock()
		return
	}
	if b.idle == nil {
		b.idle = make(chan struct{})
	}
	idle := b.idle
	b.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
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

// flush sends pipelines while there are requests, then parks (see park).
// It holds its slot of inflight until it exits.
func (b *batcher) flush(slot int) {
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	b.mu.Lock()
	for {
		batch := b.take(time.Now())
		if len(batch) == 0 {
			if linger == nil {
				linger = time.NewTimer(flusherLinger)
			} else {
				linger.Reset(flusherLinger)
			}
			if b.park(linger) {
				continue
			}
			b.flushers--
			b.inflight[slot] = time.Time{}
			if b.flushers == 0 && b.idle != nil {
				close(b.idle)
				b.idle = nil
			}
			b.mu.Unlock()
			return
		}
		now := time.Now()
		b.inflight[slot] = now
		b.mu.Unlock()
		b.exec(batch, now)
		b.mu.Lock()
		b.inflight[slot] = busy
	}
}

// park waits, with b.mu held on entry and on return, for a request to be
// submitted, for linger to fire, or for the Driver to close. It reports
// whether a request came: a submit that finds a parked flusher wakes it
// rather than starting another. A closing Driver's flushers do not park,
// so that Close finds them gone once the requests on their way are done.
func (b *batcher) park(linger *time.Timer) bool {
	if b.life != nil && b.life.Err() != nil {
		return false
	}
	var done <-chan struct{}
	if b.life != nil {
		done = b.life.Done()
	}
	b.parked++
	b.mu.Unlock()
	select {
	case <-b.wake: // the submitter took us off parked
		b.mu.Lock()
		return true
	case <-linger.C:
	case <-done:
	}
	b.mu.Lock()
	select {
	case <-b.wake:
		// A submit chose a parked flusher as the timer fired: it may as
		// well be this one.
		return true
	default:
		b.parked--
		return false
	}
}

// renewalsOverdue is how long the oldest queued renewal may wait before
// renewals go out ahead of other requests (see take).
const renewalsOverdue = 50 * time.Millisecond

// enqueue puts c in its queue. b.mu held.
func (b *batcher) enqueue(c *call) {
	if c.req.script == redislua.Renew || c.req.script == redislua.RenewMany {
		c.queued = time.Now()
		b.bulk = append(b.bulk, c)
		return
	}
	if c.req.script == redislua.Release {
		b.relief = append(b.relief, c)
		return
	}
	b.queue = append(b.queue, c)
}

// weight is what c costs the instance, counted against maxPipeline: a
// RenewMany renews each of its keys.
func weight(c *call) int {
	if c.req.script == redislua.RenewMany {
		return max(c.req.keyCount(), 1)
	}
	return 1
}

// take removes the next pipeline's requests from the queues at now: up to
// maxPipeline releases, and at most maxPipeline of weight besides; a
// renewal heavier than what is left waits for the next pipeline, unless
// it would be the only one. b.mu held.
//
// Releases go first, always, and on top of the rest (they take no room
// from the renewals, which would otherwise wait as long as releases kept
// coming): each ends a hold (one renewal less to send) or hands a key to
// the waiter next in line, and an Unlock should not wait for the work of
// other holds. Other requests (acquires, reads) go next:
// a burst of renewals due together has most of a third of its leases to
// get through, and an acquire should not wait for it. But once the oldest
// queued renewal has waited renewalsOverdue, the renewals go before them
// and they get the room the renewals leave: the instance (or this client)
// is not keeping up, and what it can do goes to the locks already held
// rather than to new ones. With 100,000 holds at a 3s TTL through one
// Locker on 2 cores (5 instances), acquires sent first took the capacity
// the renewals needed and a third to a half of the holds were lost while
// the last ones were acquired. With overdue renewals first the acquires
// slow down instead (or fail with ErrUnavailable once the instances cannot
// answer them in time): one run kept all 82,557 holds it had taken. This
// moves capacity, it does not add any: when the renewals alone are more
// than the instances can do, holds are still lost (another run took all
// 100,000 over 130s and lost 20,158). Releases rode with the acquires at
// first, and so waited behind a standing backlog of overdue renewals too.
func (b *batcher) take(now time.Time) []*call {
	overdue := len(b.bulk) > 0 && now.Sub(b.bulk[0].queued) >= renewalsOverdue
	r := min(len(b.relief), maxPipeline)
	n := 0
	if !overdue {
		n = min(len(b.queue), maxPipeline)
	}
	m, w := 0, n
	for m < len(b.bulk) {
		cw := weight(b.bulk[m])
		if w+cw > maxPipeline && w > 0 {
			break
		}
		m, w = m+1, w+cw
	}
	if overdue {
		n = min(len(b.queue), max(maxPipeline-w, 0))
	}
	if r+n+m == 0 {
		return nil
	}
	batch := make([]*call, 0, r+n+m)
	batch = append(batch, b.relief[:r]...)
	batch = append(batch, b.queue[:n]...)
	batch = append(batch, b.bulk[:m]...)
	b.relief, b.queue, b.bulk = rest(b.relief, r), rest(b.queue, n), rest(b.bulk, m)
	return batch
}

// rest is q without its first n calls; nil when none is left, so that a
// drained burst does not keep its array.
func rest(q []*call, n int) []*call {
	if n == len(q) {
		return nil
	}
	clear(q[:n])
	return q[n:]
}

// exec sends one pipeline.
func (b *batcher) exec(batch []*call, now time.Time) {
	live := batch[:0]
	timeout := time.Duration(0)
	for _, c := range batch {
		switch c.dropped.Load() { // never sent: nothing to clean up
		case dropStalled:
			c.finish(nil, errStalled)
			continue
		case dropEnded:
			c.finish(nil, errNotSent)
			continue
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
	units := fold(live)
	cmds := b.pipeline(ctx, units, false)
	var retry []unit
	for k, u := range units {
		if err := cmds[k].Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // HasErrorPrefix allocates
			retry = append(retry, u)
			continue
		}
		if isTimeout(cmds[k].Err()) {
			b.warm()
		}
		u.finish(cmds[k])
	}
	if len(retry) == 0 {
		return
	}
	// First use of a script on this instance (or after a restart): send
	// the source, which also loads it for next time.
	cmds = b.pipeline(ctx, retry, true)
	for k, u := range retry {
		u.finish(cmds[k])
	}
}

// unit is one command of a pipeline: a call's request, or the renewals of
// several calls folded into one RenewMany.
type unit struct {
	calls  []*call
	folded bool // calls are single renewals, folded into one RenewMany
	script *redis.Script
	keys   []string
	args   []any
	wire   []any // a request's prebuilt command line (request.wire)
}

// fold turns a pipeline's calls into its commands: the renewals, when
// there are several, become one RenewMany, which costs the instance one
// script call instead of one per hold and answers each as Renew would.
func fold(calls []*call) []unit {
	units := make([]unit, 0, len(calls))
	var renewals []*call
	for _, c := range calls {
		if c.req.script == redislua.Renew && foldable(c.req) {
			renewals = append(renewals, c)
			continue
		}
		units = append(units, unit{calls: []*call{c}, script: c.req.script, keys: c.req.keys, args: c.req.args, wire: c.req.wire})
	}
	// One RenewMany per lease: it extends all its keys to the same one.
	for len(renewals) > 0 {
		lease := renewals[0].req.args[1]
		var same, rest []*call
		for _, c := range renewals {
			if c.req.args[1] == lease {
				same = append(same, c)
			} else {
				rest = append(rest, c)
			}
		}
		renewals = rest
		if len(same) == 1 {
			c := same[0]
			units = append(units, unit{calls: same, script: c.req.script, keys: c.req.keys, args: c.req.args})
			continue
		}
		keys, owners := make([]string, len(same)), make([]string, len(same))
		for i, c := range same {
			keys[i], owners[i] = c.req.keys[0], c.req.args[0].(string)
		}
		ks, as := redislua.RenewManyArgs(keys, owners, lease.(int64))
		units = append(units, unit{calls: same, folded: true, script: redislua.RenewMany, keys: ks, args: as})
	}
	return units
}

// foldable says whether r is a Renew as RenewArgs builds it (one key; its
// owner and lease), which fold may send as part of a RenewMany.
func foldable(r request) bool {
	if r.wire != nil || len(r.keys) != 1 || len(r.args) != 2 {
		return false
	}
	_, owner := r.args[0].(string)
	_, lease := r.args[1].(int64)
	return owner && lease
}

// processor is what a client and a pipeline have in common for sending
// a command built in advance.
type processor interface {
	redis.Scripter
	Process(context.Context, redis.Cmder) error
}

// send queues u's command on c: by the script's SHA, or with its source
// when the instance did not know it (which also loads it). A prebuilt
// EVALSHA line goes out as it is; with the source, it is split back into
// keys and arguments.
func (u unit) send(ctx context.Context, c processor, source bool) *redis.Cmd {
	switch {
	case u.wire == nil && source:
		return u.script.Eval(ctx, c, u.keys, u.args...)
	case u.wire == nil:
		return u.script.EvalSha(ctx, c, u.keys, u.args...)
	case !source:
		cmd := redis.NewCmd(ctx, u.wire...)
		_ = c.Process(ctx, cmd) // its error is the command's
		return cmd
	}
	n := u.wire[2].(int)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = u.wire[3+i].(string)
	}
	return u.script.Eval(ctx, c, keys, u.wire[3+n:]...)
}

// finish answers u's calls from its command's reply.
func (u unit) finish(cmd *redis.Cmd) {
	if !u.folded {
		u.calls[0].finish(cmd.Result())
		return
	}
	v, err := cmd.Result()
	var vals []any
	var errs []error
	if err == nil {
		vals, errs, err = redislua.ParseRenewMany(v, len(u.calls))
	}
	for i, c := range u.calls {
		if err != nil {
			c.finish(nil, err)
			continue
		}
		c.finish(vals[i], errs[i])
	}
}

func (b *batcher) pipeline(ctx context.Context, units []unit, source bool) []*redis.Cmd {
	if len(units) == 1 { // a plain command costs less than a pipeline of one
		return []*redis.Cmd{units[0].send(ctx, b.client, source)}
	}
	pipe := b.client.Pipeline()
	cmds := make([]*redis.Cmd, len(units))
	for k, u := range units {
		cmds[k] = u.send(ctx, pipe, source)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own error
	return cmds
}
