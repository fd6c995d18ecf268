package faults

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// manyHolds is how many holds worker 0 of scenario 18 takes on one Locker.
const manyHolds = 1000

// manyHoldsOne lets one cell of scenario 18 run at a time.
var manyHoldsOne sync.Mutex

// Scenario 18: many holds (manyHolds, TTLs of 4 to 6 s, PostgreSQL 8 to
// 10 s, Consul 10 to 12 s, half with Lock and Done, half inside Do) on one Locker, whose store is then cut
// off: a toxiproxy link that holds every byte, or, on file://, every state
// file's flock held from outside. Every renewal call stalls until its own
// deadline; the loss of each hold must not wait behind them: every Done
// (and Do's context) closes before the lease can end on the store
// (done-before-lease-end). A taker with a Locker of its own then takes over
// a sample of the keys, once their leases end, and writes their counters;
// the cut-off holder then writes them with its old tokens. Fenced, those
// writes are rejected and every per-key check holds; unfenced (the canary)
// they are accepted and seen.
func manyHoldsCutOff(t *testing.T, b Backend) {
	// A thousand holds under the race detector load a small machine: two
	// such cells at once, in two lanes, would be measuring that load.
	manyHoldsOne.Lock()
	defer manyHoldsOne.Unlock()
	for _, fenced := range []bool{false, true} {
		manyHoldsRun(t, b, fenced)
	}
}

func manyHoldsRun(t *testing.T, b Backend, fenced bool) {
	b.TTL = max(b.TTL, 4*time.Second)
	spread := 2 * time.Second
	if u, err := url.Parse(b.URL); err == nil && u.Scheme == "zk" {
		// A ZooKeeper hold's TTL is its session's timeout: one for all.
		spread = 0
		q := u.Query()
		q.Set("session_timeout", b.TTL.String())
		u.RawQuery = q.Encode()
		b.URL = u.String()
	}
	if b.Name == "postgres" {
		// A renewal is a round trip on a pooled connection: pgx's default
		// pool (4 connections here) does not renew a thousand holds of 4
		// to 6 s in time on a loaded machine, and they are lost before the
		// cut, which is not what this cell tests. Longer leases halve the
		// renewals, which cost the race detector most here.
		b.URL += "&pool_max_conns=32"
		b.TTL = 8 * time.Second
	}
	maxTTL := holdTTL(b.TTL, spread, 20)
	urls := []string{b.URL, b.URL}
	var cut func() error
	heal := func() {}
	if u, err := url.Parse(b.URL); err == nil && u.Scheme == "file" {
		cut = func() error {
			release, err := flockAll(u.Path)
			heal = release
			return err
		}
		defer func() { heal() }()
	} else {
		px := NewProxies()
		defer px.Close()
		proxied, link, err := px.Rewrite(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		urls[0], cut = proxied, link.Cut
	}
	r := Start(t, b, RunOptions{Workers: 2, Fenced: fenced, Holds: manyHolds, HoldsSpread: spread, URL: func(i int) string { return urls[i] }})
	if e := r.WaitFor(3*time.Minute, fmt.Sprintf("%d holds taken", manyHolds), func(e Event) bool {
		return (e.Kind == EvHeld || e.Kind == EvError) && e.Worker == 0
	}); e.Kind == EvError {
		t.Fatalf("%s: worker 0 could not take its holds: %s", b.Name, e.Err)
	}
	cutAt := Mono()
	if err := cut(); err != nil {
		t.Fatal(err)
	}
	r.WaitFor(maxTTL+b.Grace+time.Minute, fmt.Sprintf("the loss of all %d holds", manyHolds),
		countOf(manyHolds, func(e Event) bool { return e.Kind == EvLost && e.Worker == 0 }))
	// On file:// the taker needs the flocks too: the store comes back
	// for everyone but the cut-off holder, who lost every hold by now.
	heal()
	heal = func() {}
	r.signal(1, syscall.SIGUSR1)
	taken := len(takenKeys(manyHolds))
	takerDone := countOf(taken, func(e Event) bool { return e.Worker == 1 && (e.Kind == EvWrite || e.Kind == EvReject) })
	if e := r.WaitFor(maxTTL+b.Grace+b.Liveness+time.Minute, "the taker's writes", func(e Event) bool {
		return takerDone(e) || e.Worker == 1 && e.Kind == EvError
	}); e.Kind == EvError {
		t.Fatalf("%s: the taker failed on %s: %s", b.Name, e.Key, e.Err)
	}
	r.signal(0, syscall.SIGUSR1)
	r.WaitFor(time.Minute, "the cut-off holder's stale writes",
		countOf(taken, func(e Event) bool { return e.Worker == 0 && (e.Kind == EvWrite || e.Kind == EvReject) }))
	h := r.Stop()

	var early int
	for _, e := range h.Events {
		if e.Kind == EvLost && e.Mono < cutAt {
			early++
		}
	}
	if early > 0 {
		t.Errorf("%s: %d holds lost before the store was cut off", b.Name, early)
	}
	done := CheckDoneBeforeLeaseEnd(h, 0)
	label := fmt.Sprintf("18 %d holds on one Locker, its store cut off", manyHolds) + fencedLabel(fenced)
	if fenced {
		judge(t, label, b, h, expect{extra: []Check{done, KeyChecks(h, CheckExclusion), KeyChecks(h, CheckLostUpdates),
			KeyChecks(h, CheckStaleTokens), KeyChecks(h, CheckMonotoneTokens)}})
		stale := 0
		for _, e := range h.Events {
			if e.Worker == 0 && e.Kind == EvWrite {
				stale++
			}
		}
		if stale > 0 {
			t.Errorf("%s: %d of the cut-off holder's %d stale writes were accepted", b.Name, stale, taken)
		}
	} else {
		judge(t, label, b, h, expect{
			extra:       []Check{done, KeyChecks(h, CheckExclusion), KeyChecks(h, CheckMonotoneTokens)},
			canaryExtra: []Check{KeyChecks(h, CheckStaleTokens), KeyChecks(h, CheckLostUpdates)},
		})
	}
}

// countOf matches the n-th event that matches.
func countOf(n int, match func(Event) bool) func(Event) bool {
	seen := 0
	return func(e Event) bool {
		if match(e) {
			seen++
		}
		return seen >= n
	}
}

// flockAll takes an exclusive flock(2) on every state file of a file://
// lock directory and keeps it until release: every renewal of a key there
// waits for it until its deadline, as on a stalled store. (The backend
// holds a file's flock only for one read-modify-write, so taking them all
// waits microseconds.)
func flockAll(dir string) (release func(), err error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.lock"))
	if err != nil {
		return func() {}, err
	}
	var fds []int
	release = func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
		fds = nil
	}
	for _, name := range names {
		fd, err := unix.Open(name, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			release()
			return func() {}, err
		}
		fds = append(fds, fd)
		for {
			if err = unix.Flock(fd, unix.LOCK_EX); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			release()
			return func() {}, fmt.Errorf("flock %s: %w", name, err)
		}
	}
	if len(names) == 0 {
		return release, fmt.Errorf("no state files in %s", dir)
	}
	return release, nil
}
