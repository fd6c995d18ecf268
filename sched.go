package dlock

import (
	"context"
	"errors"
	"github.com/dlock-go/dlock/observe"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Limits of the renewal scheduler.
const (
	// maxRenewWorkers bounds the goroutines that run driver calls for the
	// scheduler (Renew, RenewBatch, the loss of a hold). They are started
	// on demand and exit as soon as no work is queued. A driver without
	// RenewBatch costs a round trip per hold, so it gets more of them:
	// renewals of many holds then overlap as they did with a timer each
	// (ZooKeeper and Consul multiplex them over one connection).
	maxRenewWorkers       = 32
	maxRenewWorkersSingle = 1024
	// maxRenewBatch is the most holds handed to one RenewBatch call.
	maxRenewBatch = 1024
	// maxLossWorkers bounds the goroutines of the loss lane, which ends
	// the holds whose validity window ran down (closes Done, tells the
	// observers). The lane makes no driver call, so it never waits behind
	// one: however many renewal calls a stalled store keeps in flight,
	// Done closes at the loss margin.
	maxLossWorkers = 4
	// lossChunk is how many lost holds a loss worker takes at a time.
	lossChunk = 256
	// schedLinger is how long the loop goroutine stays after the last hold
	// ended, so that a program that locks and unlocks in a loop does not
	// start a goroutine for every hold.
	schedLinger = 250 * time.Millisecond
)

// scheduler is a Locker's renewal watchdog: one timer heap of every hold,
// keyed by when each must be looked at next (its renewal, or its loss
// deadline), served by one goroutine that runs while holds exist (and
// schedLinger after the last one ended), a bounded pool of workers for
// the driver calls, and a loss lane of its own. A hold costs an entry in
// the heap, not a goroutine or a timer; holds due together are renewed
// together, in one RenewBatch call when the driver has it.
//
// The two pools never share work: a renewal call on a stalled store keeps
// its worker until its deadline (the loss margin of the earliest hold it
// renews), and a loss queued behind such calls would close Done after the
// lease could have ended on the server. Lost holds go to the loss lane,
// which runs no driver call and so is never kept waiting by one.
//
// The loop sleeps on one timer that schedule and remove reset themselves
// (a timer's Reset does not wake anyone), so that a hold granted or ended
// costs no goroutine switch.
type scheduler struct {
	l     *Locker
	batch driver.BatchRenewer // nil unless the driver renews in batches
	epoch time.Time           // origin of the renewal grid (align)

	mu    sync.Mutex
	heap  holdHeap
	timer *time.Timer // when the loop looks next; set under mu
	// armed says the timer is set to fire at timerAt (since), or has fired
	// and the loop has yet to look; a hold due no earlier needs no Reset.
	// The loop clears it whenever it looks, so it is never wrongly true.
	armed      bool
	timerAt    int64
	running    bool      // the loop goroutine runs
	emptySince time.Time // when the heap last became empty
	closing    bool      // Close: the loop leaves as soon as the heap is empty
	jobs       []func()  // driver calls for the pool
	workers    int       // pool goroutines running
	lost       []*hold   // holds for the loss lane
	lossers    int       // loss lane goroutines running
}

func newScheduler(l *Locker) *scheduler {
	s := &scheduler{l: l, epoch: time.Now(), timer: time.NewTimer(time.Hour)}
	s.timer.Stop()
	if b, ok := l.drv.(driver.BatchRenewer); ok {
		s.batch = b
	}
	return s
}

// since is t as the heap keeps it: nanoseconds since the epoch, on the
// monotonic clock when t has its reading.
func (s *scheduler) since(t time.Time) int64 { return int64(t.Sub(s.epoch)) }

// align moves a renewal time at to the nearest point of the Locker's grid
// of step driver.RenewGridStep(ttl) (at most a twenty-fourth of the lease
// early or late), so that holds of one TTL that were granted or renewed
// within the same step fall due at the same instant and are renewed in one
// pass, in one batch.
// The nearest point, not the one before: moving every renewal early
// shortened the interval between renewals of a hold from a third of its
// lease to 7/24 on average, one renewal in eight more than the watchdog
// asks for, which a Locker with many holds at a short TTL pays in full.
func (s *scheduler) align(at time.Time, ttl time.Duration) time.Time {
	step := driver.RenewGridStep(ttl)
	if step <= 0 {
		return at
	}
	off := at.Sub(s.epoch)
	if off <= 0 {
		return at
	}
	if r := off % step; r < step/2 {
		return at.Add(-r)
	} else {
		return at.Add(step - r)
	}
}

// schedule makes the scheduler look at h at (or soon after) at. Called
// with h.mu held (h.mu is always taken before s.mu).
func (s *scheduler) schedule(h *hold, at time.Time) {
	s.mu.Lock()
	if h.hi < 0 {
		s.heap.push(h, s.since(at))
	} else {
		s.heap.fix(int(h.hi), s.since(at))
	}
	if h.hi == 0 {
		if atNs := s.since(at); !s.armed || s.timerAt > atNs {
			s.arm(time.Until(at), atNs)
		}
	}
	if !s.running {
		s.running = true
		s.l.wg.Add(1)
		go s.loop()
	}
	s.mu.Unlock()
}

// remove takes h out of the heap (it ended).
func (s *scheduler) remove(h *hold) {
	s.mu.Lock()
	if h.hi >= 0 {
		s.heap.remove(int(h.hi))
		if len(s.heap) == 0 && s.running {
			// The loop leaves after schedLinger unless a hold comes; a
			// timer that fires before then wakes it in time to wait on.
			now := time.Now()
			s.emptySince = now
			if at := s.since(now) + int64(s.linger()); !s.armed || s.timerAt > at {
				s.arm(s.linger(), at)
			}
		}
	}
	s.mu.Unlock()
}

// arm sets the timer to fire after d, at timerAt; s.mu held.
func (s *scheduler) arm(d time.Duration, at int64) {
	s.timer.Reset(d)
	s.armed, s.timerAt = true, at
}

// linger is how long the loop waits with an empty heap before it leaves.
// Called with s.mu held.
func (s *scheduler) linger() time.Duration {
	if s.closing {
		return 0
	}
	return schedLinger
}

// close makes the loop leave now rather than linger: Close calls it once
// every hold has ended, then waits for the loop.
func (s *scheduler) close() {
	s.mu.Lock()
	s.closing = true
	if s.running {
		s.arm(0, 0)
	}
	s.mu.Unlock()
}

// loop pops the holds that are due and acts on them; it returns when no
// hold has been left for schedLinger (every hold is removed when it ends).
func (s *scheduler) loop() {
	defer s.l.wg.Done()
	var due []*hold
	for {
		s.mu.Lock()
		s.armed = false // the loop looks now, and arms it again if need be
		now := time.Now()
		if len(s.heap) == 0 {
			if s.emptySince.IsZero() {
				s.emptySince = now
			}
			if wait := s.linger() - now.Sub(s.emptySince); wait > 0 {
				s.arm(wait, s.since(now)+int64(wait))
				s.mu.Unlock()
				<-s.timer.C
				continue
			}
			s.running = false
			s.timer.Stop()
			s.mu.Unlock()
			return
		}
		s.emptySince = time.Time{}
		due = due[:0]
		for nowAt := s.since(now); len(s.heap) > 0 && s.heap[0].at <= nowAt; {
			due = append(due, s.heap.pop())
		}
		if len(s.heap) > 0 {
			s.arm(time.Duration(s.heap[0].at-s.since(now)), s.heap[0].at)
		} else if len(due) == 0 {
			s.timer.Stop()
		}
		s.mu.Unlock()
		if len(due) > 0 {
			s.dispatch(due, now)
			clear(due)
			continue
		}
		<-s.timer.C
	}
}

// dispatch decides, for each due hold, whether it is lost, due for
// renewal, or to be looked at later, and hands the driver calls to the
// pool: the renewals in batches when the driver has RenewBatch.
func (s *scheduler) dispatch(due []*hold, now time.Time) {
	var renew, lost []*hold
	for _, h := range due {
		switch h.decide(now, s.batch != nil) {
		case actLose:
			lost = append(lost, h)
		case actRenew:
			renew = append(renew, h)
		case actMax:
			s.run(h.reachMax)
		}
	}
	if len(lost) > 0 {
		s.lose(lost)
	}
	if len(renew) == 0 {
		return
	}
	if s.batch == nil {
		for _, h := range renew {
			s.run(h.watchdogRenew)
		}
		return
	}
	for len(renew) > 0 {
		n := min(len(renew), maxRenewBatch)
		part := renew[:n:n]
		renew = renew[n:]
		s.run(func() { s.renewBatch(part) })
	}
}

// run queues f for the pool, starting a worker if fewer than
// maxRenewWorkers run.
func (s *scheduler) run(f func()) {
	s.mu.Lock()
	s.jobs = append(s.jobs, f)
	limit := maxRenewWorkers
	if s.batch == nil {
		limit = maxRenewWorkersSingle
	}
	start := s.workers < limit
	if start {
		s.workers++
		s.l.wg.Add(1)
	}
	s.mu.Unlock()
	if start {
		go s.work()
	}
}

// lose hands holds whose validity window ran down to the loss lane,
// starting loss workers as the queue needs them (one per lossChunk holds,
// at most maxLossWorkers).
func (s *scheduler) lose(hs []*hold) {
	s.mu.Lock()
	s.lost = append(s.lost, hs...)
	start := max(min(maxLossWorkers, (len(s.lost)+lossChunk-1)/lossChunk)-s.lossers, 0)
	s.lossers += start
	s.l.wg.Add(start)
	s.mu.Unlock()
	for range start {
		go s.loseWork()
	}
}

// loseWork ends lost holds until the loss lane's queue is empty.
func (s *scheduler) loseWork() {
	defer s.l.wg.Done()
	var chunk []*hold
	for {
		s.mu.Lock()
		if len(s.lost) == 0 {
			s.lossers--
			s.lost = nil
			s.mu.Unlock()
			return
		}
		n := min(len(s.lost), lossChunk)
		chunk = append(chunk[:0], s.lost[:n]...)
		clear(s.lost[:n])
		s.lost = s.lost[n:]
		s.mu.Unlock()
		for _, h := range chunk {
			h.ended() // declares it lost: its window ran out
		}
	}
}

func (s *scheduler) work() {
	defer s.l.wg.Done()
	for {
		s.mu.Lock()
		if len(s.jobs) == 0 {
			s.workers--
			s.jobs = nil
			s.mu.Unlock()
			return
		}
		f := s.jobs[0]
		s.jobs[0] = nil
		s.jobs = s.jobs[1:]
		s.mu.Unlock()
		f()
	}
}

// renewBatch renews hs (each marked in flight by decide) in one
// RenewBatch call, bounded by the earliest of their loss deadlines. An
// Unlock of one of them waits for the call (as it waits for a single
// renewal); the call's context is cancelled once every hold in it has
// been unlocked or lost.
func (s *scheduler) renewBatch(hs []*hold) {
	live := hs[:0:0]
	var deadline time.Time
	for _, h := range hs {
		if h.ended() {
			h.flightDone(nil, false)
			continue
		}
		live = append(live, h)
		h.mu.Lock()
		if at := h.lossAt(); deadline.IsZero() || at.Before(deadline) {
			deadline = at
		}
		h.mu.Unlock()
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	round := &renewRound{cancel: cancel}
	round.left.Store(int32(len(live)))
	dhs := make([]driver.Hold, len(live))
	var (
		calls []observe.Call // with an observer only
		octx  []context.Context
	)
	for i, h := range live {
		dhs[i] = h.dh
		h.mu.Lock()
		if h.fl != nil {
			h.fl.round.Store(round)
		}
		h.mu.Unlock()
		if o := h.obs; o != nil {
			if calls == nil {
				calls, octx = make([]observe.Call, len(live)), make([]context.Context, len(live))
			}
			calls[i] = h.m.call(observe.OpRenew)
			calls[i].Watchdog = true
			octx[i] = o.Begin(ctx, calls[i])
		}
	}
	sent := time.Now()
	ttls, errs := s.batch.RenewBatch(ctx, dhs)
	for i, h := range live {
		var ttl time.Duration
		var err error
		if i < len(ttls) {
			ttl = ttls[i]
		}
		if i < len(errs) {
			err = errs[i]
		}
		if len(ttls) != len(live) || len(errs) != len(live) {
			err = driver.Unavailable(errBatchShape)
		}
		var before time.Time
		if h.obs != nil {
			before = h.leaseNow().Expires
		}
		err = h.renewed(ctx, sent, ttl, err)
		if o := h.obs; o != nil {
			r := observe.Result{Outcome: renewOutcome(err, h.unlocked()), Err: err, Token: h.dh.Token, Duration: time.Since(calls[i].Start)}
			if err == nil {
				r.Margin = time.Until(before)
				ls := h.leaseNow()
				r.TTL, r.Expires = ls.TTL, ls.Expires
			}
			o.End(octx[i], calls[i], r)
		}
		h.flightDone(err, true)
	}
}

// errBatchShape is the renewal error of every hold of a RenewBatch call
// that did not return one answer per hold.
var errBatchShape = errors.New("dlock: the driver's RenewBatch did not answer once per hold")
