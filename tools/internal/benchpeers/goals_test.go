package benchpeers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func f64(v float64) *float64 { return &v }

// goalsOf writes the goals of rs as a run on 2 cores would, each
// acquisition held 1 ms, each timed run 2 s, 16 parallel keys.
func goalsOf(rs []Result) string {
	var buf bytes.Buffer
	writeGoals(&buf, Meta{Machine: map[string]string{"nproc": "2"}, Config: Config{Hold: time.Millisecond, Lockers: goalSizes,
		Duration: 2 * time.Second, Parallel: 16}}, rs)
	return buf.String()
}

// goalRow is the row of the goals table whose goal begins with prefix:
// goal, measured, status and why.
func goalRow(t *testing.T, md, prefix string) (what, measured, status, why string) {
	t.Helper()
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| "+prefix) {
			c := strings.Split(strings.TrimSuffix(strings.TrimPrefix(l, "| "), " |"), " | ")
			if len(c) != 4 {
				t.Fatalf("row %q has %d cells: %s", prefix, len(c), l)
			}
			return c[0], c[1], c[2], c[3]
		}
	}
	t.Fatalf("no row %q in\n%s", prefix, md)
	return
}

// wantGoal checks a row's status and that its measured and why cells
// hold the given texts; a target met or n/a carries no reason.
func wantGoal(t *testing.T, md, prefix, status string, measured []string, why ...string) {
	t.Helper()
	_, m, st, w := goalRow(t, md, prefix)
	if st != status {
		t.Errorf("row %q: status %q, want %q (measured %s; why %s)", prefix, st, status, m, w)
	}
	for _, x := range measured {
		if !strings.Contains(m, x) {
			t.Errorf("row %q: measured %q lacks %q", prefix, m, x)
		}
	}
	for _, x := range why {
		if !strings.Contains(w, x) {
			t.Errorf("row %q: why lacks %q:\n%s", prefix, x, w)
		}
	}
	if status != "**not met**" && w != "" {
		t.Errorf("row %q is %s with a reason: %s", prefix, status, w)
	}
	if status == "**not met**" && w == "" {
		t.Errorf("row %q is not met without a reason", prefix)
	}
}

// cont is a contended result.
func cont(sys string, n int, acq float64, fairMax, fairMin int64) Result {
	return Result{Scenario: ScenContended, System: sys, Lockers: n, AcqPerSec: acq, FairMax: fairMax, FairMin: fairMin, WaitP99: 10}
}

func TestGoalsHeader(t *testing.T) {
	md := goalsOf(nil)
	if !strings.Contains(md, "## goals of issue 45 (targets against this run)") || strings.Contains(md, "issue 22") {
		t.Fatalf("want the goals of issue 45 only:\n%s", md)
	}
	// A run without any figure: every goal is there, n/a.
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| goal ") && !strings.Contains(l, " | n/a | ") {
			t.Errorf("a goal checked without figures: %s", l)
		}
	}
	for _, prefix := range []string{"1 Redis x2/x8/x32: fairness", "1 mem: client CPU", "1 file x8/x32: acq/s", "2 Redis hot key x32",
		"3 uncontended: Redlock", "3 parallel-keys: Redis", "4 Redlock", "5 100000 holds, dlock consul://"} {
		goalRow(t, md, prefix)
	}
}

// Goal 1's fairness: max/min at most 1.5 at every size, no worker without
// an acquisition; a size not run (or failed) leaves it n/a unless another
// already misses it.
func TestFairnessGoal(t *testing.T) {
	const row = "1 Redis x2/x8/x32: fairness"
	for _, c := range []struct {
		name     string
		x8       *Result // nil: not run
		x32      Result
		status   string
		measured []string
		why      []string
	}{
		{"1.4 everywhere", &Result{FairMax: 140, FairMin: 100}, Result{FairMax: 140, FairMin: 100}, "met", []string{"x8 1.40", "x32 1.40"}, nil},
		{"1.5 is within", &Result{FairMax: 150, FairMin: 100}, Result{FairMax: 140, FairMin: 100}, "met", []string{"x8 1.50"}, nil},
		{"1.6", &Result{FairMax: 160, FairMin: 100}, Result{FairMax: 140, FairMin: 100}, "**not met**", []string{"x8 1.60"},
			[]string{"At 8 processes one worker got 160 acquisitions and another 100"}},
		{"a worker at zero", &Result{FairMax: 140, FairMin: 100}, Result{FairMax: 30, FairMin: 0}, "**not met**", []string{"x32 30/0"},
			[]string{"At 32 processes one worker got 30 acquisitions and another none", "whole 2s window"}},
		{"x8 not run", nil, Result{FairMax: 140, FairMin: 100}, "n/a", []string{"x8 n/a"}, nil},
		{"x8 not run, x32 at zero", nil, Result{FairMax: 30, FairMin: 0}, "**not met**", []string{"x8 n/a", "x32 30/0"}, nil},
		{"x32 failed", &Result{FairMax: 140, FairMin: 100}, Result{FairMax: 140, FairMin: 100, Error: "worker 3: boom"}, "n/a", []string{"x32 n/a"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs := []Result{cont(sysRedis, 2, 500, 500, 499)}
			if c.x8 != nil {
				r := cont(sysRedis, 8, 500, c.x8.FairMax, c.x8.FairMin)
				rs = append(rs, r)
			}
			x32 := cont(sysRedis, 32, 500, c.x32.FairMax, c.x32.FairMin)
			x32.Error = c.x32.Error
			rs = append(rs, x32)
			wantGoal(t, goalsOf(rs), row, c.status, append(c.measured, "x2 1.00"), c.why...)
		})
	}
}

// Goal 1's client CPU: at 32 processes at most 1.25x what it is at 2;
// n/a where the run has none (mem://).
func TestClientCPUGoal(t *testing.T) {
	rs := func(x32 *float64) []Result {
		a, b := cont(sysEtcd, 2, 400, 200, 200), cont(sysEtcd, 32, 200, 7, 6)
		a.ClientCPU, b.ClientCPU = f64(1000), x32
		return []Result{a, cont(sysEtcd, 8, 300, 40, 37), b, cont(sysMem, 2, 800, 400, 400), cont(sysMem, 32, 800, 25, 25)}
	}
	wantGoal(t, goalsOf(rs(f64(1250))), "1 etcd: client CPU", "met", []string{"x2 1000", "x8 n/a", "x32 1250", "(1.25x)"})
	// 1300 µs at 200/s is 260 ms a second, against 1000 µs at 400/s: 400.
	wantGoal(t, goalsOf(rs(f64(1300))), "1 etcd: client CPU", "**not met**", []string{"(1.30x)"},
		"400 ms of CPU a second at 2 processes and 260 at 32 (0.65x)", "from 400 to 200 (0.50x)")
	withPeer := append(rs(f64(1300)), cont(sysEtcdMutex, 2, 20, 10, 10), cont(sysEtcdMutex, 32, 190, 7, 5))
	withPeer[len(withPeer)-2].ClientCPU, withPeer[len(withPeer)-1].ClientCPU = f64(3000), f64(3900)
	wantGoal(t, goalsOf(withPeer), "1 etcd: client CPU", "**not met**", []string{"(1.30x)"},
		"The peers' client CPU per acquisition grew over the same range too", "etcd concurrency.Mutex 3000 to 3900 µs (1.30x)")
	wantGoal(t, goalsOf(rs(nil)), "1 etcd: client CPU", "n/a", []string{"x32 n/a"})
	wantGoal(t, goalsOf(rs(nil)), "1 mem: client CPU", "n/a", nil)
}

// Goal 1's rate: at least the peer's at every size; file:// and mem://
// at least 0.75x their own at 2 processes.
func TestRateGoal(t *testing.T) {
	peer := func(x8 float64) []Result {
		var rs []Result
		for _, n := range goalSizes {
			d := cont(sysZK, n, 300, 10, 10)
			if n == 8 {
				d.AcqPerSec = x8
			}
			d.CmdsPerAcq = f64(7)
			rs = append(rs, d, cont(sysZKLock, n, 300, 10, 10))
		}
		return rs
	}
	const zk = "1 ZooKeeper x2/x8/x32: acq/s >= 1.0x " + sysZKLock
	wantGoal(t, goalsOf(peer(300)), zk, "met", []string{"x2 1.00x, x8 1.00x, x32 1.00x"})
	wantGoal(t, goalsOf(peer(297)), zk, "**not met**", []string{"x8 0.99x"},
		"At 8 processes a cycle took 3.37 ms against 3.33 ms for zk.Lock, with 7.0 packets", "On 2 cores")
	wantGoal(t, goalsOf(peer(300)[:4]), zk, "n/a", []string{"x32 n/a"})

	own := func(x8, x32 float64) []Result {
		return []Result{cont(sysFile, 2, 1000, 500, 500), cont(sysFile, 8, x8, 100, 100), cont(sysFile, 32, x32, 25, 25)}
	}
	const file = "1 file x8/x32: acq/s >= 0.75x its own at x2"
	wantGoal(t, goalsOf(own(750, 800)), file, "met", []string{"x2 1000/s, x8 0.75x, x32 0.80x"})
	wantGoal(t, goalsOf(own(750, 740)), file, "**not met**", []string{"x32 0.74x"},
		"At 32 processes a cycle took 1.35 ms against 1.00 ms at 2")
	wantGoal(t, goalsOf(own(750, 740)[1:]), file, "n/a", []string{"x2 n/a"})
}

// Goal 2: on Redis at 8 and 32 processes, at least the spin lock's rate
// with at most a quarter of its wait p99.
func TestHotKeyGoal(t *testing.T) {
	rs := func(acq, p99 float64) []Result {
		d, b := cont(sysRedis, 8, acq, 80, 79), cont(sysBare, 8, 600, 120, 50)
		d.WaitP99, b.WaitP99 = p99, 100
		return []Result{d, b}
	}
	const row = "2 Redis hot key x8"
	wantGoal(t, goalsOf(rs(600, 25)), row, "met", []string{"1.00x acq/s; wait p99 25.0 against 100.0 ms (0.25x)"})
	wantGoal(t, goalsOf(rs(600, 26)), row, "**not met**", nil, "the p99 is 26.0 ms against the spin lock's 100.0 ms, whose quarter is 25.0 ms")
	wantGoal(t, goalsOf(rs(590, 20)), row, "**not met**", []string{"0.98x"}, "A FIFO handoff", "fairness 80/79 against its 120/50")
	wantGoal(t, goalsOf(rs(600, 20)), "2 Redis hot key x32", "n/a", nil)
}

// Goal 3: the paired uncontended floors and the parallel-keys one.
func TestUncontendedFloors(t *testing.T) {
	paired := func(sys, peer string, med float64) []Result {
		return []Result{
			{Scenario: ScenUncontended, System: sys, AcqPerSec: 1000, CmdsPerAcq: f64(4)},
			{Scenario: ScenUncontended, System: peer, AcqPerSec: 1000, CmdsPerAcq: f64(3)},
			{Scenario: ScenPaired, System: sys, Peer: peer, AcqPerSec: 1000, PeerAcqPerSec: 1000, BlockRatios: []float64{med - 0.01, med, med + 0.01}},
		}
	}
	for _, c := range []struct {
		label, sys, peer string
		floor            float64
	}{
		{"Redis", sysRedis, sysBare, 0.90}, {"ZooKeeper", sysZK, sysZKLock, 0.95},
		{"etcd", sysEtcd, sysEtcdMutex, 0.95}, {"Redlock", sysRedlock, sysRedsyncRL, 0.95},
	} {
		row := fmt.Sprintf("3 uncontended: %s >= %.2fx %s", c.label, c.floor, c.peer)
		wantGoal(t, goalsOf(paired(c.sys, c.peer, c.floor)), row, "met", []string{fmt.Sprintf("%.2fx paired", c.floor)})
		wantGoal(t, goalsOf(paired(c.sys, c.peer, c.floor-0.01)), row, "**not met**", []string{fmt.Sprintf("%.2fx paired", c.floor-0.01)})
		wantGoal(t, goalsOf(paired(c.sys, c.peer, c.floor)[:1]), row, "n/a", nil)
	}
	par := func(acq float64) []Result {
		return []Result{
			{Scenario: ScenParallel, System: sysRedis, AcqPerSec: acq, CmdsPerAcq: f64(13), UsecPerAcq: f64(27), RTPerAcq: f64(2)},
			{Scenario: ScenParallel, System: sysBare, AcqPerSec: 10000, CmdsPerAcq: f64(4), UsecPerAcq: f64(5), RTPerAcq: f64(2)},
		}
	}
	const row = "3 parallel-keys: Redis >= 0.90x"
	wantGoal(t, goalsOf(par(9000)), row, "met", []string{"0.90x"})
	wantGoal(t, goalsOf(par(8900)), row, "**not met**", []string{"0.89x"}, "16 goroutines on one client", "13.0 server commands per Lock+Unlock against 4.0")
	wantGoal(t, goalsOf(par(9000)[1:]), row, "n/a", nil)
}

// Goal 3's client side: client CPU and allocations per Lock+Unlock on
// parallel keys within 1.5x redislock's.
func TestClientCostGoal(t *testing.T) {
	rs := func(cpu, allocs float64) []Result {
		return []Result{
			{Scenario: ScenParallel, System: sysRedis, AcqPerSec: 9000, ClientCPU: f64(cpu), Allocs: f64(allocs), AllocBytes: f64(4300)},
			{Scenario: ScenParallel, System: sysRedislock, AcqPerSec: 10000, ClientCPU: f64(40), Allocs: f64(30), AllocBytes: f64(1400)},
		}
	}
	const row = "3 parallel-keys: Redis client CPU and allocations"
	wantGoal(t, goalsOf(rs(60, 45)), row, "met", []string{"CPU 60.0 against 40.0 µs (1.50x), allocations 45.0 against 30.0 (1.50x)"})
	wantGoal(t, goalsOf(rs(61, 45)), row, "**not met**", []string{"(1.52x)"}, "4300 B against 1400 B")
	wantGoal(t, goalsOf(rs(60, 46)), row, "**not met**", []string{"(1.53x)"}, "six keys")
	wantGoal(t, goalsOf(rs(60, 45)[:1]), row, "n/a", nil)
	noAllocs := rs(60, 45)
	noAllocs[1].Allocs = nil
	wantGoal(t, goalsOf(noAllocs), row, "n/a", nil)
}

// Goal 4: Redlock keeps 100,000 holds at a 3 s TTL without losing one.
func TestRedlockHoldsGoal(t *testing.T) {
	rs := func(holds, lost int) []Result {
		return []Result{{Scenario: ScenManyHolds, System: sysRedlock, TTL: "3s", Holds: holds, Held: holds, Lost: lost, HeapPerHold: 1400}}
	}
	const row = "4 Redlock, 100000 holds at a 3s TTL"
	wantGoal(t, goalsOf(rs(100000, 0)), row, "met", []string{"0 lost of 100000 held"})
	short := rs(100000, 0)
	short[0].Held = 94749 // acquiring stopped short: none of those kept was lost
	wantGoal(t, goalsOf(short), row, "**not met**", []string{"0 lost of 94749 held (of 100000)"}, "the renewals of the 94749 holds already taken went first")
	wantGoal(t, goalsOf(rs(100000, 1)), row, "**not met**", []string{"1 lost"},
		"need 100000 renewals a second", "each a check-and-extend on each of 5 servers", "1 holds ran out of lease")
	wantGoal(t, goalsOf(rs(1000, 0)), row, "n/a", []string{"1000 holds run"})
	wantGoal(t, goalsOf(nil), row, "n/a", nil)
}

// Goal 5: every many-holds row at 100,000 holds, with the reason of a
// miss from the row's own figures.
func TestManyHoldsGoal(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []Result{
		{Scenario: ScenManyHolds, System: sysFile, TTL: "3s", Holds: 100000, Held: 100000, Lost: 7, HeapPerHold: 900,
			HeldClientCores: f(1.5)},
		{Scenario: ScenManyHolds, System: sysRedlock, TTL: "3s", Holds: 100000, Held: 80000, Lost: 9, LostAcquiring: 4,
			HeapPerHold: 900, HeldClientCores: f(0.75), HeldServerCores: f(1.2)},
		{Scenario: ScenManyHolds, System: sysRedis, TTL: "default", Holds: 100000, Held: 100000, HeapPerHold: 1500},
		{Scenario: ScenManyHolds, System: sysRedis, TTL: "3s", Holds: 100000, Held: 100000, HeapPerHold: 2100},
		{Scenario: ScenManyHolds, System: sysEtcd, TTL: "default", Holds: 100000, Held: 100000, HeapPerHold: 2048, GoroutinesPerHold: 0.02},
		{Scenario: ScenManyHolds, System: sysMem, TTL: "default", Holds: 1000, Held: 1000, HeapPerHold: 1000},
	}
	md := goalsOf(rs)
	wantGoal(t, md, "5 100000 holds, TTL 3s, dlock file://", "**not met**", []string{"7 lost"},
		"100000 renewals a second", "seven system calls", "7 holds ran out of lease, all after acquiring ended",
		"keeping them took 1.50 of the 2 cores in this process alone")
	wantGoal(t, md, "5 100000 holds, TTL 3s, "+sysRedlock, "**not met**", []string{"80000/100000 held", "9 lost"},
		"9 holds ran out of lease, 4 of them while acquiring went on. Acquiring stopped at 80000 of 100000",
		"keeping them took 1.95 of the 2 cores: 0.75 in this process and 1.20 in the servers' main threads")
	wantGoal(t, md, "5 100000 holds, TTL default, dlock redis://", "met", []string{"1500 B"})
	wantGoal(t, md, "5 100000 holds, TTL 3s, dlock redis://", "**not met**", []string{"2100 B"},
		"at the default TTL the same holds cost 1500 B", "renewed every 1s")
	wantGoal(t, md, "5 100000 holds, TTL default, dlock etcd://", "**not met**", []string{"0.020 goroutines", "2048 B"},
		"2000 goroutines for the whole Locker")
	wantGoal(t, md, "5 100000 holds, TTL default, dlock mem://", "n/a", []string{"1000/1000 held"})
	wantGoal(t, md, "5 100000 holds, dlock zk://", "n/a", nil)
}

// With a paired result, the uncontended goal is decided by the median of
// its blocks' ratios, not by the separate runs' ratio.
func TestPairedRatioDecidesUncontended(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []Result{
		{Scenario: ScenUncontended, System: sysEtcd, AcqPerSec: 600, CmdsPerAcq: f(2)},
		{Scenario: ScenUncontended, System: sysEtcdMutex, AcqPerSec: 700, CmdsPerAcq: f(2)},
		{Scenario: ScenPaired, System: sysEtcd, Peer: sysEtcdMutex, AcqPerSec: 690, PeerAcqPerSec: 680,
			BlockRatios: []float64{0.90, 1.01, 1.02, 1.03, 1.10}},
		{Scenario: ScenUncontended, System: sysZK, AcqPerSec: 700, CmdsPerAcq: f(4)},
		{Scenario: ScenUncontended, System: sysZKLock, AcqPerSec: 650, CmdsPerAcq: f(3)},
		{Scenario: ScenPaired, System: sysZK, Peer: sysZKLock, AcqPerSec: 640, PeerAcqPerSec: 660,
			BlockRatios: []float64{0.92, 0.94, 0.96}},
	}
	if med, lo, hi := pairedRatio(&rs[2]); med != 1.02 || lo != 1.01 || hi != 1.03 {
		t.Errorf("paired ratio %v (quartiles %v-%v), want 1.02 (1.01-1.03)", med, lo, hi)
	}
	var buf bytes.Buffer
	writeGoals(&buf, Meta{Machine: map[string]string{"nproc": "2"}, Config: Config{Hold: time.Millisecond, Lockers: []int{8}}}, rs)
	md := buf.String()
	for prefix, want := range map[string][]string{
		"3 uncontended: etcd":      {"1.02x paired (quartiles 1.01-1.03); 0.86x in separate runs", "| met |"},
		"3 uncontended: ZooKeeper": {"0.94x paired (quartiles 0.93-0.95); 1.08x in separate runs", "**not met**", "4.0 packets"},
	} {
		var l string
		for _, line := range strings.Split(md, "\n") {
			if strings.HasPrefix(line, "| "+prefix) {
				l = line
			}
		}
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("row %q lacks %q:\n%s", prefix, w, md)
			}
		}
	}
}

// With the fenced reference lock in the run, the reason for the Redis
// uncontended target splits the gap: the token alone (the fenced lock
// against the bare one) and dlock's work beyond it (dlock against the
// fenced lock), both paired; without it, the reason stays the counts.
func TestRedisUncontendedReasonSplitsTheGap(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	base := []Result{
		{Scenario: ScenUncontended, System: sysRedis, AcqPerSec: 6000, CmdsPerAcq: f(13), UsecPerAcq: f(28), RTPerAcq: f(2)},
		{Scenario: ScenUncontended, System: sysBare, AcqPerSec: 8500, CmdsPerAcq: f(4), UsecPerAcq: f(4.5), RTPerAcq: f(2)},
		{Scenario: ScenPaired, System: sysRedis, Peer: sysBare, AcqPerSec: 6000, PeerAcqPerSec: 8000,
			BlockRatios: []float64{0.70, 0.72, 0.75}},
	}
	fenced := []Result{
		{Scenario: ScenUncontended, System: sysFenced, AcqPerSec: 8200, CmdsPerAcq: f(6), UsecPerAcq: f(8.5), RTPerAcq: f(2)},
		{Scenario: ScenPaired, System: sysFenced, Peer: sysBare, AcqPerSec: 8000, PeerAcqPerSec: 8300,
			BlockRatios: []float64{0.94, 0.96, 0.97}},
		{Scenario: ScenPaired, System: sysRedis, Peer: sysFenced, AcqPerSec: 6000, PeerAcqPerSec: 7900,
			BlockRatios: []float64{0.74, 0.76, 0.80}},
	}
	row := func(rs []Result) string {
		var buf bytes.Buffer
		writeGoals(&buf, Meta{Machine: map[string]string{"nproc": "2"}, Config: Config{Hold: time.Millisecond, Lockers: []int{8}}}, rs)
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, "| 3 uncontended: Redis ") {
				return line
			}
		}
		t.Fatalf("no Redis uncontended row:\n%s", buf.String())
		return ""
	}
	with := row(append(slices.Clone(base), fenced...))
	for _, w := range []string{"0.72x paired (quartiles 0.71-0.73)", "**not met**", "ran at 0.96x the bare lock, paired (quartiles 0.95-0.96)",
		"dlock ran at 0.76x that lock, paired (quartiles 0.75-0.78)", "13.0 server commands per Lock+Unlock against 6.0 (bare: 4.0)"} {
		if !strings.Contains(with, w) {
			t.Errorf("with the fenced lock, the row lacks %q:\n%s", w, with)
		}
	}
	if without := row(base); strings.Contains(without, "fenced") || !strings.Contains(without, "13.0 server commands per Lock+Unlock against 4.0") {
		t.Errorf("without the fenced lock, the row should give the counts against the bare lock only:\n%s", without)
	}
}

// The JSON of a run (benchpeers -json) keeps what the report needs, so
// that -render writes the same report from it, and no endpoint.
func TestMetaJSONRoundTrip(t *testing.T) {
	cfg := Config{Endpoints: Endpoints{Redis: "redis://:secret@127.0.0.1:6379"}, Reps: 3, Duration: 2 * time.Second,
		Lockers: []int{2, 8}, Hold: time.Millisecond, Holds: 10, HoldTTLs: []time.Duration{0, 3 * time.Second}}
	meta := Meta{Command: "c", Started: time.Unix(1, 0).UTC(), Finished: time.Unix(2, 0).UTC(),
		Machine: map[string]string{"nproc": "2"}, Config: cfg}
	rs := []Result{{Scenario: ScenContended, System: sysRedis, Lockers: 8, AcqPerSec: 500, WaitP99: 20}}
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("secret")) {
		t.Fatalf("the JSON carries an endpoint: %s", b)
	}
	var back Meta
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var a, c bytes.Buffer
	WriteMarkdown(&a, meta, rs)
	WriteMarkdown(&c, back, rs)
	if a.String() != c.String() {
		t.Fatalf("the report from the JSON differs:\n%s\n---\n%s", a.String(), c.String())
	}
}
