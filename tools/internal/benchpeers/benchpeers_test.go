package benchpeers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// TestMain lets the test binary be a contended worker too, as the
// benchpeers command is: the harness re-executes it for each worker.
func TestMain(m *testing.M) {
	if RunWorkerIfAsked() {
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tiny is a run of every scenario, as short as it can be.
func tiny(ep Endpoints, sys ...string) Config {
	return Config{
		Endpoints: ep, Systems: sys, Reps: 1, Duration: 150 * time.Millisecond, Parallel: 2,
		Lockers: []int{2}, Hold: time.Millisecond, Holds: 20, HoldFor: 50 * time.Millisecond,
		HoldTTLs: []time.Duration{0}, AcquireBudget: time.Minute,
	}
}

// checkShape asserts that every system of the run has a result for every
// scenario, without error or overlap, and that the report has its
// sections.
func checkShape(t *testing.T, cfg Config, rs []Result, names []string, dlockNames []string) string {
	t.Helper()
	want := map[string]int{}
	for _, n := range names {
		want[ScenUncontended+"|"+n]++
		want[ScenParallel+"|"+n]++
		want[ScenContended+"|"+n]++
	}
	for _, n := range dlockNames {
		want[ScenManyHolds+"|"+n]++
		// The read-write lock's write and read, uncontended only.
		for _, kind := range []string{"write", "read"} {
			want[fmt.Sprintf("%s|%s RWMutex %s (%d readers)", ScenUncontended, n, kind, rwReaders)]++
		}
	}
	for _, p := range pairs(cfg.selected()) {
		want[ScenPaired+"|"+p.dlock.name]++
	}
	for _, r := range rs {
		k := r.Scenario + "|" + r.System
		if want[k] == 0 {
			t.Errorf("unexpected result %s", k)
			continue
		}
		want[k]--
		if r.Error != "" {
			t.Errorf("%s: error %s", k, r.Error)
		}
		if r.Overlaps != 0 {
			t.Errorf("%s: %d overlapping holds", k, r.Overlaps)
		}
		switch r.Scenario {
		case ScenPaired:
			if med, _, _ := pairedRatio(&r); r.Acquisitions == 0 || r.PeerAcqPerSec <= 0 || len(r.BlockRatios) < 2 || med <= 0 {
				t.Errorf("%s against %s: %d acquisitions, peer %.0f/s, ratios %v", k, r.Peer, r.Acquisitions, r.PeerAcqPerSec, r.BlockRatios)
			}
		case ScenManyHolds:
			if r.Held != r.Holds || r.Lost != 0 {
				t.Errorf("%s: held %d of %d, lost %d", k, r.Held, r.Holds, r.Lost)
			}
			if r.ReleaseSeconds <= 0 || r.ReleaseErrors != 0 {
				t.Errorf("%s: release took %vs with %d Unlock errors (%s); want timed, none", k, r.ReleaseSeconds, r.ReleaseErrors, r.Error)
			}
		default:
			if r.Acquisitions == 0 {
				t.Errorf("%s: no acquisition", k)
			}
		}
		if r.Scenario == ScenContended && (r.Lockers != 2 || r.FairMax == 0) {
			t.Errorf("%s: lockers %d, fairness %d/%d", k, r.Lockers, r.FairMax, r.FairMin)
		}
	}
	for k, n := range want {
		if n != 0 {
			t.Errorf("missing result %s", k)
		}
	}
	var buf bytes.Buffer
	WriteMarkdown(&buf, Meta{Command: "test", Started: time.Now(), Finished: time.Now(), Machine: Machine(), Config: cfg}, rs)
	md := buf.String()
	for _, h := range []string{"| nproc |", "## uncontended", "## parallel-keys", "## contended across processes: 2 workers",
		"## many holds", "| release s |", "## ratios dlock / peer", "## goals of issue 45"} {
		if !strings.Contains(md, h) {
			t.Errorf("report lacks %q", h)
		}
	}
	return md
}

func TestHarnessMem(t *testing.T) {
	cfg := tiny(Endpoints{Mem: true})
	rs := Run(testenv.Context(t, 2*time.Minute), cfg)
	checkShape(t, cfg, rs, []string{"dlock mem://"}, []string{"dlock mem://"})
}

// TestHarnessFile runs dlock file:// on a lock directory of its own, the
// contended workers as processes of this test binary sharing it.
func TestHarnessFile(t *testing.T) {
	cfg := tiny(Endpoints{File: "file://" + t.TempDir()})
	rs := Run(testenv.Context(t, 2*time.Minute), cfg)
	checkShape(t, cfg, rs, []string{"dlock file://"}, []string{"dlock file://"})
}

// TestHarnessRedis runs the bare lock, the fenced reference lock and dlock
// redis:// on a real Redis, the contended workers as processes of this
// test binary, and checks the counted figures and the ratios between them.
func TestHarnessRedis(t *testing.T) {
	ep := Endpoints{Redis: testenv.Endpoint(t, "DLOCK_REDIS_URL")}
	cfg := tiny(ep, "bare SET NX PX", "fenced SET NX PX", "dlock redis://")
	rs := Run(testenv.Context(t, 2*time.Minute), cfg)
	names := []string{sysBare, sysFenced, sysRedis}
	md := checkShape(t, cfg, rs, names, []string{"dlock redis://"})
	for _, r := range rs {
		if r.Scenario == ScenManyHolds || r.Scenario == ScenPaired {
			continue
		}
		if r.CmdsPerAcq == nil || r.UsecPerAcq == nil || r.RTPerAcq == nil {
			t.Errorf("%s %s: server commands, usec or round trips not counted", r.Scenario, r.System)
		} else if *r.RTPerAcq < 1 || *r.CmdsPerAcq < 1 {
			t.Errorf("%s %s: %.2f round trips, %.2f commands per acquisition: fewer than one", r.Scenario, r.System, *r.RTPerAcq, *r.CmdsPerAcq)
		}
	}
	if !strings.Contains(md, "## uncontended-paired") || !strings.Contains(md, "| dlock redis:// | bare SET NX PX spin lock, 10 ms retry | ") {
		t.Errorf("report lacks the paired table or its row:\n%s", md)
	}
	if !strings.Contains(md, "| contended x2 | dlock redis:// | bare SET NX PX spin lock, 10 ms retry |") {
		t.Errorf("report lacks the contended ratio row:\n%s", md)
	}
	// The fenced lock is paired with the bare one, and dlock with it.
	for _, row := range []string{"| " + sysFenced + " | " + sysBare + " | ", "| " + sysRedis + " | " + sysFenced + " | "} {
		if !strings.Contains(md, row) {
			t.Errorf("report lacks the paired row %q:\n%s", row, md)
		}
	}
}

// noLock is a "lock" that excludes nothing, for checking that the
// contended scenario's overlap check catches two holders at once.
type noLock struct{}

func (noLock) lock(context.Context, string) (func(context.Context) error, error) {
	return func(context.Context) error { return nil }, nil
}
func (noLock) roundTrips() int64 { return -1 }
func (noLock) close() error      { return nil }

func TestOverlapCheckCatchesBrokenLock(t *testing.T) {
	saved := systems
	t.Cleanup(func() { systems = saved })
	systems = append(systems[:len(systems):len(systems)], system{name: "no lock", store: "mem", inProcess: true,
		open: func(context.Context, Endpoints, time.Duration) (client, error) { return noLock{}, nil }})
	cfg := tiny(Endpoints{Mem: true}, "no lock")
	cfg.Scenarios, cfg.Lockers, cfg.Hold = []string{ScenContended}, []int{4}, 2*time.Millisecond
	rs := Run(testenv.Context(t, time.Minute), cfg)
	if len(rs) != 1 || rs[0].Overlaps == 0 || !Overlapped(rs) {
		t.Fatalf("four holders of a lock that excludes nothing: want overlaps reported, got %+v", rs)
	}
}

func TestOverlaps(t *testing.T) {
	seq := []acquisition{{Call: 0, Got: 1, Release: 5}, {Call: 0, Got: 6, Release: 9}, {Call: 2, Got: 10, Release: 12}}
	if n := overlaps(seq); n != 0 {
		t.Errorf("sequential holds: %d overlaps, want 0", n)
	}
	// The third began while the first (the longest) was still held.
	over := []acquisition{{Got: 1, Release: 20}, {Got: 21, Release: 22}, {Got: 15, Release: 16}}
	if n := overlaps(over); n != 1 {
		t.Errorf("one hold inside another: %d overlaps, want 1", n)
	}
}

func TestFillContended(t *testing.T) {
	from := time.Unix(0, 0)
	until := from.Add(100 * time.Nanosecond)
	rs := []workerResult{
		{ID: 0, RoundTrips: 6, CPU: 3000, Acquisitions: []acquisition{{Call: 0, Got: 10, Release: 20}, {Call: 21, Got: 50, Release: 60}}},
		{ID: 1, RoundTrips: 3, CPU: 5000, Acquisitions: []acquisition{{Call: 5, Got: 30, Release: 40}, {Call: 95, Got: 150, Release: 160}}},
	}
	var r Result
	fillContended(&r, rs, from, until)
	if r.Overlaps != 0 || r.FairMax != 2 || r.FairMin != 1 {
		t.Errorf("overlaps %d, fairness %d/%d; want 0, 2/1", r.Overlaps, r.FairMax, r.FairMin)
	}
	if r.RTPerAcq == nil || *r.RTPerAcq != 9.0/4 {
		t.Errorf("round trips per acquisition %v, want 2.25", r.RTPerAcq)
	}
	// 8 µs of CPU over 4 acquisitions.
	if r.ClientCPU == nil || *r.ClientCPU != 2 {
		t.Errorf("client CPU per acquisition %v µs, want 2", r.ClientCPU)
	}
	rs[1].CPU = -1 // a worker that shares its process
	var r2 Result
	fillContended(&r2, rs, from, until)
	if r2.ClientCPU != nil {
		t.Errorf("client CPU per acquisition with a worker not measured: %v, want none", *r2.ClientCPU)
	}
	// Handoffs: 30-20 (waiting since 5) and 50-40 (since 21); the last
	// called Lock (95) after the lock was free (60): no handoff.
	if r.HandoffP99 == nil || *r.HandoffP99 != float64(10)/1e6 {
		t.Errorf("handoff p99 %v ms, want 0.00001", r.HandoffP99)
	}
}

// TestContendedReportsWhyAWorkerFailed makes every worker fail its warm-up
// (its lock directory cannot be made: a file stands in the way). A worker
// that failed has exited before its start line is written, so the write
// fails too; the result must give the worker's own reason, not the write's.
func TestContendedReportsWhyAWorkerFailed(t *testing.T) {
	blocker := t.TempDir() + "/not-a-dir"
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := tiny(Endpoints{File: "file://" + blocker + "/locks"})
	cfg.Scenarios, cfg.Lockers = []string{ScenContended}, []int{8}
	rs := Run(testenv.Context(t, time.Minute), cfg)
	if len(rs) != 1 {
		t.Fatalf("want one result, got %+v", rs)
	}
	e := rs[0].Error
	if !strings.HasPrefix(e, "worker ") || !(strings.Contains(e, "open: ") || strings.Contains(e, "warm-up: ")) {
		t.Fatalf("workers that cannot make their lock directory: want the worker's open or warm-up error, got %q", e)
	}
}

// flaky is a client whose first fails locks fail.
type flaky struct{ fails, calls int }

func (f *flaky) lock(context.Context, string) (func(context.Context) error, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, fmt.Errorf("cold start %d", f.calls)
	}
	return func(context.Context) error { return nil }, nil
}
func (f *flaky) roundTrips() int64 { return -1 }
func (f *flaky) close() error      { return nil }

// TestWarmUpRetriesAndReports checks that a warm-up that fails is tried
// again, that the retries and the first error are reported, and that one
// failing every time is an error.
func TestWarmUpRetriesAndReports(t *testing.T) {
	ctx := testenv.Context(t, time.Minute)
	retries, first, err := warmUp(ctx, &flaky{fails: 2}, "k")
	if err != nil || retries != 2 || first == nil || first.Error() != "cold start 1" {
		t.Errorf("two failures then success: retries %d, first %v, err %v; want 2, cold start 1, nil", retries, first, err)
	}
	retries, first, err = warmUp(ctx, &flaky{}, "k")
	if err != nil || retries != 0 || first != nil {
		t.Errorf("no failure: retries %d, first %v, err %v; want 0, nil, nil", retries, first, err)
	}
	f := &flaky{fails: 100}
	retries, _, err = warmUp(ctx, f, "k")
	if err == nil || retries != warmRetries || f.calls != warmRetries+1 {
		t.Errorf("always failing: retries %d, calls %d, err %v; want %d, %d, an error", retries, f.calls, err, warmRetries, warmRetries+1)
	}
}

// TestManyHoldsOrder: many-holds runs every dlock system but the
// read-write rows, each once, ZooKeeper's last and Consul's before it, the
// others in report order.
func TestManyHoldsOrder(t *testing.T) {
	var got, want []string
	var consul, zk []string
	for _, s := range systems {
		switch {
		case !s.dlock || s.uncontendedOnly:
		case s.store == "consul":
			consul = append(consul, s.name)
		case s.store == "zk":
			zk = append(zk, s.name)
		default:
			want = append(want, s.name)
		}
	}
	want = append(append(want, consul...), zk...)
	for _, i := range manyHoldsOrder(systems) {
		got = append(got, systems[i].name)
	}
	if len(zk) == 0 || len(consul) == 0 || !slices.Equal(got, want) {
		t.Fatalf("many-holds order %q, want %q", got, want)
	}
}
