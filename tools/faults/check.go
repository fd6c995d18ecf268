package faults

import (
	"fmt"
	"sort"
	"time"
)

// Check is the verdict of one checker over one history.
type Check struct {
	Name       string
	Violations int
	Detail     string // the first violation, or what was checked
}

// OK reports whether the check found nothing.
func (c Check) OK() bool { return c.Violations == 0 }

// History is what a run produced: every event, the resource's final value,
// and the instants (CLOCK_MONOTONIC) at which faults healed.
type History struct {
	Events []Event
	Final  int64
	Finals map[string]int64 // each permit's counter, in a semaphore run
	Healed []int64
}

type interval struct {
	worker     int
	token      uint64
	start, end int64
}

// holds pairs each acquire with the next release, loss or acquire of the
// same worker, and clips the interval at the validity deadline: a holder may
// act only inside it, so overlap past it is the fencing token's job. Events
// inside a hold carry the lease's deadline at that moment, so renewals
// extend the interval.
func holds(h History) []interval {
	open := map[int]*interval{}
	var out []interval
	closeAt := func(w int, at int64) {
		if iv := open[w]; iv != nil {
			iv.end = min(iv.end, at)
			out = append(out, *iv)
			delete(open, w)
		}
	}
	for _, e := range sorted(h.Events) {
		switch e.Kind {
		case EvAcquire:
			closeAt(e.Worker, e.Mono)
			open[e.Worker] = &interval{worker: e.Worker, token: e.Token, start: e.Mono, end: e.Expires}
		case EvRead, EvWrite, EvReject:
			if iv := open[e.Worker]; iv != nil && iv.token == e.Token {
				iv.end = max(iv.end, e.Expires)
			}
		case EvRelease, EvLost:
			closeAt(e.Worker, e.Mono)
		case EvError:
			if e.Token != 0 { // a failed Unlock ends the hold too
				closeAt(e.Worker, e.Mono)
			}
		}
	}
	for _, iv := range open {
		out = append(out, *iv)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

func sorted(evs []Event) []Event {
	out := append([]Event(nil), evs...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Mono < out[j].Mono })
	return out
}

// CheckExclusion: no two holders' validity intervals overlap.
func CheckExclusion(h History) Check {
	c := Check{Name: "exclusion"}
	ivs := holds(h)
	var maxEnd int64
	var maxIv interval
	for i, iv := range ivs {
		if i > 0 && iv.start < maxEnd && iv.worker != maxIv.worker {
			c.Violations++
			if c.Detail == "" {
				c.Detail = fmt.Sprintf("worker %d (token %d) acquired %v before worker %d's hold (token %d) ended",
					iv.worker, iv.token, time.Duration(maxEnd-iv.start), maxIv.worker, maxIv.token)
			}
		}
		if iv.end > maxEnd {
			maxEnd, maxIv = iv.end, iv
		}
	}
	if c.Detail == "" {
		c.Detail = fmt.Sprintf("%d holds", len(ivs))
	}
	return c
}

// CheckLostUpdates: the final counter equals the number of accepted writes.
func CheckLostUpdates(h History) Check {
	c := Check{Name: "lost-updates"}
	var writes int64
	for _, e := range h.Events {
		if e.Kind == EvWrite {
			writes++
		}
	}
	if h.Final != writes {
		c.Violations = int(max(writes-h.Final, h.Final-writes))
		c.Detail = fmt.Sprintf("final counter %d after %d accepted increments", h.Final, writes)
	} else {
		c.Detail = fmt.Sprintf("%d increments", writes)
	}
	return c
}

// CheckStaleTokens: no operation is accepted with a token below the highest
// the resource had already accepted.
func CheckStaleTokens(h History) Check {
	c := Check{Name: "stale-token"}
	var highest uint64
	for _, e := range sorted(h.Events) {
		if e.Kind != EvRead && e.Kind != EvWrite {
			continue
		}
		if e.Token < highest {
			c.Violations++
			if c.Detail == "" {
				c.Detail = fmt.Sprintf("worker %d's %s with token %d accepted after token %d", e.Worker, e.Kind, e.Token, highest)
			}
		}
		highest = max(highest, e.Token)
	}
	return c
}

// CheckMonotoneTokens: tokens strictly increase in acquisition order.
func CheckMonotoneTokens(h History) Check {
	c := Check{Name: "monotone-tokens"}
	var last uint64
	n := 0
	for _, e := range sorted(h.Events) {
		if e.Kind != EvAcquire {
			continue
		}
		n++
		if e.Token <= last {
			c.Violations++
			if c.Detail == "" {
				c.Detail = fmt.Sprintf("worker %d acquired token %d after token %d", e.Worker, e.Token, last)
			}
		}
		last = max(last, e.Token)
	}
	if c.Detail == "" {
		c.Detail = fmt.Sprintf("%d acquisitions", n)
	}
	return c
}

// CheckLossBeforeExpiry: every loss a worker observed was observed before
// the validity deadline of the hold it ended.
func CheckLossBeforeExpiry(h History) Check {
	c := Check{Name: "loss-before-expiry"}
	expires := map[int]int64{}
	for _, e := range sorted(h.Events) {
		switch e.Kind {
		case EvAcquire:
			expires[e.Worker] = e.Expires
		case EvLost:
			x := expires[e.Worker]
			if e.Expires != 0 {
				x = e.Expires // the deadline the holder last saw, renewals included
			}
			if x != 0 && e.Mono > x {
				c.Violations++
				if c.Detail == "" {
					c.Detail = fmt.Sprintf("worker %d learned of its loss %v after its validity deadline",
						e.Worker, time.Duration(e.Mono-x))
				}
			}
		}
	}
	return c
}

// CheckLiveness: after every heal, some worker acquires within bound.
func CheckLiveness(h History, bound time.Duration) Check {
	c := Check{Name: "liveness"}
	evs := sorted(h.Events)
	for _, healed := range h.Healed {
		ok := false
		for _, e := range evs {
			if e.Kind == EvAcquire && e.Mono >= healed {
				if d := time.Duration(e.Mono - healed); d <= bound {
					ok = true
					c.Detail = fmt.Sprintf("acquired %v after the heal", d.Round(time.Millisecond))
				}
				break
			}
		}
		if !ok {
			c.Violations++
			c.Detail = fmt.Sprintf("no acquisition within %v of the heal", bound)
		}
	}
	return c
}
