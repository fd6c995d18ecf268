package dlock

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// The scheduler's heap gives the holds back in order of due time through
// any mix of pushes, moves and removals, and keeps each hold's index
// right: schedule and remove find a hold by it.
func TestHoldHeapOrdersAndIndexes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q holdHeap
	in := map[*hold]int64{} // the holds in the heap and their due times
	check := func(step int) {
		t.Helper()
		if len(q) != len(in) {
			t.Fatalf("step %d: heap has %d entries, want %d", step, len(q), len(in))
		}
		for i, e := range q {
			if int(e.h.hi) != i {
				t.Fatalf("step %d: hold at index %d says it is at %d", step, i, e.h.hi)
			}
			if in[e.h] != e.at {
				t.Fatalf("step %d: hold due at %d is in the heap at %d", step, in[e.h], e.at)
			}
			if i > 0 && q[(i-1)/heapArity].at > e.at {
				t.Fatalf("step %d: index %d (due %d) is below a parent due later (%d)", step, i, e.at, q[(i-1)/heapArity].at)
			}
		}
	}
	pick := func() *hold {
		return q[rng.IntN(len(q))].h
	}
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 4 || len(q) == 0:
			h := &hold{hi: -1}
			at := rng.Int64N(1000) // repeats, as aligned renewals do
			q.push(h, at)
			in[h] = at
		case op < 6:
			h := pick()
			at := rng.Int64N(1000)
			q.fix(int(h.hi), at)
			in[h] = at
		case op < 8:
			h := pick()
			if got := q.remove(int(h.hi)); got != h || h.hi != -1 {
				t.Fatalf("step %d: remove returned another hold, or left its index at %d", step, h.hi)
			}
			delete(in, h)
		default:
			want := slices.Min(slices.Collect(maps.Values(in)))
			at := q[0].at
			h := q.pop()
			if at != want || in[h] != want || h.hi != -1 {
				t.Fatalf("step %d: pop gave a hold due at %d (index left %d); the earliest is due at %d", step, in[h], h.hi, want)
			}
			delete(in, h)
		}
		check(step)
	}
	for len(q) > 0 {
		last := q[0].at
		h := q.pop()
		if len(q) > 0 && q[0].at < last {
			t.Fatalf("drain: %d came after %d", q[0].at, last)
		}
		delete(in, h)
	}
	if len(in) != 0 {
		t.Fatalf("%d holds never came out", len(in))
	}
}
