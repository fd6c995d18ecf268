package dlock

// heapArity is the number of children of a node of holdHeap. Four halve
// the depth of a binary heap, and with it the holds whose index changes on
// each push and pop; the children of a node sit side by side in the array,
// so comparing four costs about what comparing two does.
const heapArity = 4

// schedEntry is a hold in the scheduler's heap and when it is due, in
// nanoseconds since the scheduler's epoch. The time is kept in the entry,
// not read from the hold, so that ordering the heap reads only the heap's
// own array: with 100,000 holds, reading each hold's due time on the way
// was a cache miss per comparison, and the largest cost of the
// scheduler.
type schedEntry struct {
	at int64
	h  *hold
}

// holdHeap is a min-heap of holds by due time; each hold's hi is its
// index, -1 once it has left.
type holdHeap []schedEntry

// set puts e at index i and tells its hold.
func (q holdHeap) set(i int, e schedEntry) {
	q[i] = e
	e.h.hi = int32(i)
}

// push adds h, due at at.
func (q *holdHeap) push(h *hold, at int64) {
	*q = append(*q, schedEntry{at: at, h: h})
	q.up(len(*q) - 1)
}

// fix moves the hold at index i, now due at at, to its place.
func (q holdHeap) fix(i int, at int64) {
	q[i].at = at
	if !q.up(i) {
		q.down(i)
	}
}

// remove takes out the hold at index i.
func (q *holdHeap) remove(i int) *hold {
	old := *q
	last := len(old) - 1
	h := old[i].h
	if i != last {
		old.set(i, old[last])
	}
	old[last] = schedEntry{}
	*q = old[:last]
	if i != last {
		q.fix(i, old[i].at)
	}
	h.hi = -1
	return h
}

// pop removes and returns the hold due first.
func (q *holdHeap) pop() *hold { return q.remove(0) }

// up moves the entry at i towards the root while it is due before its
// parent; it reports whether it moved.
func (q holdHeap) up(i int) bool {
	e := q[i]
	start := i
	for i > 0 {
		p := (i - 1) / heapArity
		if q[p].at <= e.at {
			break
		}
		q.set(i, q[p])
		i = p
	}
	q.set(i, e)
	return i != start
}

// down moves the entry at i towards the leaves while a child is due
// before it.
func (q holdHeap) down(i int) {
	e := q[i]
	n := len(q)
	for {
		first := heapArity*i + 1
		if first >= n {
			break
		}
		m := first
		for c := first + 1; c < min(first+heapArity, n); c++ {
			if q[c].at < q[m].at {
				m = c
			}
		}
		if q[m].at >= e.at {
			break
		}
		q.set(i, q[m])
		i = m
	}
	q.set(i, e)
}
