package faults

import (
	"fmt"
	"testing"
	"time"
)

// The read-write cells run workers on a dlock.RWMutex of rwReaders
// readers: writers read and increment the one counter, readers only read
// it, and the resource fences writes against the highest token of either
// kind and reads against the highest writer token (docs/rwmutex.md).
// Writers' events name no key, readers' name readersKey, so that each
// kind's holds are checked apart and against each other.
const rwReaders = 2

// splitRW returns the writers' and the readers' histories of a read-write
// run; the writers' keeps the counter.
func splitRW(h History) (writers, readers History) {
	writers.Final, readers.Final = h.Final, h.Final
	for _, e := range h.Events {
		if e.Key == readersKey {
			readers.Events = append(readers.Events, e)
		} else {
			writers.Events = append(writers.Events, e)
		}
	}
	return writers, readers
}

// CheckReadersWriters: no reader's validity interval overlaps a writer's.
func CheckReadersWriters(writers, readers History) Check {
	c := Check{Name: "readers-writers"}
	ws, rs := holds(writers), holds(readers)
	for _, w := range ws {
		for _, r := range rs {
			if r.start < w.end && w.start < r.end {
				c.Violations++
				if c.Detail == "" {
					c.Detail = fmt.Sprintf("reader %d (token %d) and writer %d (token %d) held together for %v",
						r.worker, r.token, w.worker, w.token, time.Duration(min(r.end, w.end)-max(r.start, w.start)))
				}
			}
		}
	}
	if c.Detail == "" {
		c.Detail = fmt.Sprintf("%d writer and %d reader holds apart", len(ws), len(rs))
	}
	return c
}

// rwChecks are the checks every read-write cell must pass: the writers'
// usual ones on their own history, at most rwReaders readers at once,
// and no reader beside a writer.
func rwChecks(h History, fenced bool) (must, canary []Check) {
	w, r := splitRW(h)
	must = []Check{named("writers-", CheckExclusion(w)), named("writers-", CheckMonotoneTokens(w)),
		CheckPermits(r, rwReaders), CheckReadersWriters(w, r)}
	stale := []Check{named("writers-", CheckLostUpdates(w)), named("writers-", CheckStaleTokens(w))}
	if fenced {
		return append(must, stale...), nil
	}
	return must, stale
}

func named(prefix string, c Check) Check { c.Name = prefix + c.Name; return c }

// readersFrom is the ReaderWorkers of a run whose workers from first on
// are readers.
func readersFrom(first int) func(int) bool { return func(i int) bool { return i >= first } }

// Scenario 19: a writer of a read-write lock paused past its lease, then
// resumed. The write lock goes to another writer, whose write comes first;
// readers keep reading meanwhile. Fenced, the paused writer's stale write
// is rejected; unfenced (the canary) it is accepted and seen. As in 2,
// loss-before-expiry is not judged.
func rwWriterPaused(t *testing.T, b Backend) {
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: 4, Fenced: fenced, Readers: rwReaders, ReaderWorkers: readersFrom(2),
			Hold: victimHold(100 * time.Millisecond), SelfStop: true})
		victim := r.WaitFor(time.Minute, "the paused writer's read", isRead(0))
		r.WaitStopped(0)
		r.WaitFor(b.TTL+b.Grace+time.Minute, "a write by the next writer", writeAfter(victim))
		r.WaitFor(time.Minute, "a read after it", func(e Event) bool { return e.Kind == EvRead && e.Key == readersKey && e.Token > victim.Token })
		r.Resume(0)
		r.WaitFor(30*time.Second, "the paused writer's stale step", staleStep(victim))
		h := r.Stop()
		must, canary := rwChecks(h, fenced)
		if fenced {
			judge(t, "19 read-write lock: writer paused past its lease (fenced)", b, h, expect{extra: must})
			if !rejected(h, victim) {
				t.Errorf("%s: the paused writer's stale write was not rejected", b.Name)
			}
		} else {
			judge(t, "19 read-write lock: writer paused past its lease (unfenced)", b, h, expect{extra: must, canaryExtra: canary})
		}
	}
}

// Scenario 20: a reader of a read-write lock killed while it holds. A
// writer gets in once the reader's lease has run out, within the lease
// plus the liveness bound, and every check holds.
func rwReaderKilled(t *testing.T, b Backend) {
	r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Readers: rwReaders, ReaderWorkers: func(i int) bool { return i != 1 },
		Hold: victimHold(b.TTL)})
	r.WaitFor(time.Minute, "the victim reader's read", isRead(0))
	r.Kill(0)
	r.Healed()
	killed := Mono()
	r.WaitFor(b.TTL+b.Grace+b.Liveness+time.Minute, "a writer's write after the kill",
		func(e Event) bool { return e.Kind == EvWrite && e.Worker == 1 && e.Mono > killed })
	time.Sleep(time.Second)
	h := r.Stop()
	must, _ := rwChecks(h, true)
	judge(t, "20 read-write lock: reader killed", b, h, expect{extra: must})
}

// CheckReadersWriters sees a reader inside its window beside a writer
// inside its own, and passes a reader that comes after the writer's
// release, or after its window ended (a paused writer: fencing's job).
func TestCheckReadersWriters(t *testing.T) {
	const ms = int64(time.Millisecond)
	apart := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 5, Mono: 0, Expires: 100 * ms},
		{Worker: 1, Kind: EvRelease, Token: 5, Mono: 40 * ms},
		{Worker: 2, Kind: EvAcquire, Key: readersKey, Token: 6, Mono: 50 * ms, Expires: 150 * ms},
		{Worker: 3, Kind: EvAcquire, Key: readersKey, Token: 7, Mono: 55 * ms, Expires: 155 * ms},
		{Worker: 2, Kind: EvRelease, Key: readersKey, Token: 6, Mono: 60 * ms},
		{Worker: 3, Kind: EvRelease, Key: readersKey, Token: 7, Mono: 70 * ms},
		{Worker: 4, Kind: EvAcquire, Token: 8, Mono: 80 * ms, Expires: 180 * ms},
		{Worker: 4, Kind: EvRelease, Token: 8, Mono: 90 * ms},
	}}
	if c := CheckReadersWriters(splitRW(apart)); !c.OK() {
		t.Errorf("readers after a writer's release: %s", c.Detail)
	}
	together := apart
	together.Events = append(append([]Event(nil), apart.Events...),
		Event{Worker: 5, Kind: EvAcquire, Key: readersKey, Token: 9, Mono: 85 * ms, Expires: 185 * ms},
		Event{Worker: 5, Kind: EvRelease, Key: readersKey, Token: 9, Mono: 95 * ms})
	if c := CheckReadersWriters(splitRW(together)); c.OK() {
		t.Errorf("a reader beside a writer: not seen (%s)", c.Detail)
	}
	paused := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 5, Mono: 0, Expires: 100 * ms},
		{Worker: 2, Kind: EvAcquire, Key: readersKey, Token: 6, Mono: 150 * ms, Expires: 250 * ms},
		{Worker: 1, Kind: EvLost, Token: 5, Mono: 200 * ms},
	}}
	if c := CheckReadersWriters(splitRW(paused)); !c.OK() {
		t.Errorf("a reader after a paused writer's window: %s", c.Detail)
	}
}
