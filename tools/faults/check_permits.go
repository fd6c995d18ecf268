package faults

import (
	"fmt"
	"sort"
	"strings"
)

// The checks of a semaphore run, where workers hold permits of one
// semaphore: each permit has its own key, fencing tokens and counter.

// CheckPermits: never more than n holders inside their validity windows
// at once.
func CheckPermits(h History, n int) Check {
	c := Check{Name: "permits"}
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, iv := range holds(h) {
		if iv.end > iv.start {
			edges = append(edges, edge{iv.start, 1}, edge{iv.end, -1})
		}
	}
	// Ends before starts at the same instant: a hold ending as the next
	// begins is a handoff, not an overlap.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta
	})
	inside, most := 0, 0
	for _, e := range edges {
		inside += e.delta
		if inside > n {
			c.Violations++
		}
		most = max(most, inside)
	}
	c.Detail = fmt.Sprintf("at most %d of %d permits held at once", most, n)
	if c.Violations > 0 {
		c.Detail = fmt.Sprintf("%d holders at once inside their validity windows, with %d permits", most, n)
	}
	return c
}

// byPermit splits a semaphore run's history into one history per permit
// key, each with that permit's final counter.
func byPermit(h History) map[string]History {
	out := map[string]History{}
	for _, e := range h.Events {
		if e.Key == "" {
			continue
		}
		p := out[e.Key]
		p.Events = append(p.Events, e)
		out[e.Key] = p
	}
	for k, p := range out {
		p.Final = h.Finals[k]
		out[k] = p
	}
	return out
}

// PermitChecks runs a check on every permit's own history, and sums the
// verdicts into one named "permit-"+name.
func PermitChecks(h History, check func(History) Check) Check {
	return keyedChecks(h, "permit-", check)
}

// KeyChecks runs a check on every key's own history, in a run whose
// events name the key they belong to (a many-holds run), and sums the
// verdicts into one named "key-"+name.
func KeyChecks(h History, check func(History) Check) Check {
	return keyedChecks(h, "key-", check)
}

func keyedChecks(h History, prefix string, check func(History) Check) Check {
	perm := byPermit(h)
	keys := make([]string, 0, len(perm))
	for k := range perm {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := Check{Name: prefix + check(History{}).Name}
	for _, k := range keys {
		c := check(perm[k])
		out.Violations += c.Violations
		if c.Violations > 0 && out.Detail == "" {
			out.Detail = k + ": " + c.Detail
		}
	}
	if out.Detail == "" {
		out.Detail = fmt.Sprintf("%d %ss", len(keys), strings.TrimSuffix(prefix, "-"))
	}
	return out
}
