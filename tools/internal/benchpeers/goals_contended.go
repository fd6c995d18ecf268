package benchpeers

import (
	"fmt"
	"strings"
	"time"
)

// goalSizes are the numbers of contending processes goal 1 names.
var goalSizes = []int{2, 8, 32}

// hotKeySizes are those of goal 2.
var hotKeySizes = []int{8, 32}

// Goal 1's thresholds.
const (
	maxFairness = 1.5  // most over fewest acquisitions of one worker
	cpuGrowth   = 1.25 // client CPU per acquisition, most processes over fewest
	ownRateMin  = 0.75 // file:// and mem://: acq/s over their own at the fewest processes
)

// xs names sizes as the goals' rows do: "x2/x8/x32".
func xs(sizes []int) string {
	var s []string
	for _, n := range sizes {
		s = append(s, fmt.Sprintf("x%d", n))
	}
	return strings.Join(s, "/")
}

// contender is a backend goal 1 checks: its dlock system and the peer its
// rate is held against ("" for its own rate at the fewest processes).
// rateWhy explains a rate not met, from the sizes that missed it.
type contender struct {
	store, sys, peer string
	rateWhy          func(run goalRun, missed []sized) string
}

// sized is a contended result of a contender at n processes and the one
// it is held against: its peer's at n or, for file:// and mem://, its own
// at the fewest processes.
type sized struct {
	n    int
	d, b *Result
}

// contenders are the backends goal 1 names, in the report's order.
var contenders = []contender{
	{"Redis", sysRedis, sysBare, redisRateWhy},
	{"Redlock", sysRedlock, sysRedsyncRL, redlockRateWhy},
	{"etcd", sysEtcd, sysEtcdMutex, etcdRateWhy},
	{"ZooKeeper", sysZK, sysZKLock, zkRateWhy},
	{"Consul", sysConsul, sysConsulAPI, consulRateWhy},
	{"file", sysFile, "", ownRateWhy("The workers are processes of this machine, the store its file system.")},
	{"mem", sysMem, "", ownRateWhy("The workers are goroutines of one process, the store being per process.")},
}

// contended is a contended result the goals can read: run, without error.
func contended(rs []Result, sys string, n int) *Result {
	r := find(rs, ScenContended, sys, n, "")
	if r == nil || r.Error != "" {
		return nil
	}
	return r
}

// verdict folds the outcomes at several sizes: not met when one known is
// not, met when all are known and met, n/a otherwise.
type verdict struct{ known, failed, all int }

func (v *verdict) see(known, ok bool) {
	v.all++
	if known {
		v.known++
		if !ok {
			v.failed++
		}
	}
}

func (v verdict) ok() (ok, known bool) {
	if v.failed > 0 {
		return false, true
	}
	return true, v.known == v.all
}

// noCollapse checks goal 1 on every backend: fairness and no starved
// worker, client CPU per acquisition that does not grow with the waiters,
// and acquisitions per second beside the peer.
func noCollapse(gs *goals, run goalRun) {
	for _, c := range contenders {
		fairness(gs, run, c)
		clientCPU(gs, run, c)
		rate(gs, run, c)
	}
}

func fairness(gs *goals, run goalRun, c contender) {
	var v verdict
	var measured, why []string
	for _, n := range goalSizes {
		d := contended(run.rs, c.sys, n)
		if d == nil {
			v.see(false, false)
			measured = append(measured, fmt.Sprintf("x%d n/a", n))
			continue
		}
		ok := d.FairMin > 0 && float64(d.FairMax) <= maxFairness*float64(d.FairMin)
		v.see(true, ok)
		if d.FairMin == 0 {
			measured = append(measured, fmt.Sprintf("x%d %d/0", n, d.FairMax))
		} else {
			measured = append(measured, fmt.Sprintf("x%d %.2f", n, float64(d.FairMax)/float64(d.FairMin)))
		}
		switch {
		case d.FairMin == 0:
			why = append(why, fmt.Sprintf("at %d processes one worker got %d acquisitions and another none: it was in line "+
				"through the whole %v window (wait p99 %.1f ms, handoff p99 %s ms)", n, d.FairMax, run.cfg.Duration, d.WaitP99, fnum(d.HandoffP99, 2)))
		case !ok:
			why = append(why, fmt.Sprintf("at %d processes one worker got %d acquisitions and another %d (wait p99 %.1f ms, "+
				"handoff p99 %s ms)", n, d.FairMax, d.FairMin, d.WaitP99, fnum(d.HandoffP99, 2)))
		}
	}
	ok, known := v.ok()
	gs.add(fmt.Sprintf("1 %s %s: fairness max/min <= %.1f, no worker at 0", c.store, xs(goalSizes), maxFairness),
		strings.Join(measured, ", "), ok, known, upper(strings.Join(why, "; "))+".")
}

func clientCPU(gs *goals, run goalRun, c contender) {
	lo, hi := goalSizes[0], goalSizes[len(goalSizes)-1]
	what := fmt.Sprintf("1 %s: client CPU µs/acq x%d <= %.2fx x%d", c.store, hi, cpuGrowth, lo)
	var measured []string
	for _, n := range goalSizes {
		if d := contended(run.rs, c.sys, n); d != nil {
			measured = append(measured, fmt.Sprintf("x%d %s", n, fnum(d.ClientCPU, 0)))
		} else {
			measured = append(measured, fmt.Sprintf("x%d n/a", n))
		}
	}
	a, b := contended(run.rs, c.sys, lo), contended(run.rs, c.sys, hi)
	if a == nil || b == nil || a.ClientCPU == nil || b.ClientCPU == nil || *a.ClientCPU <= 0 {
		gs.add(what, strings.Join(measured, ", "), false, false, "")
		return
	}
	growth := *b.ClientCPU / *a.ClientCPU
	// CPU per acquisition is the workers' CPU per second over the
	// acquisitions per second: which of the two moved.
	ca, cb := *a.ClientCPU*a.AcqPerSec/1e3, *b.ClientCPU*b.AcqPerSec/1e3 // ms of CPU per second
	why := fmt.Sprintf("CPU per acquisition is the workers' CPU per second over the acquisitions per second. The workers spent "+
		"%.0f ms of CPU a second at %d processes and %.0f at %d (%s), %.1f ms a second more for each of the %d processes more, "+
		"on %s cores; the acquisitions per second went from %.0f to %.0f (%s).",
		ca, lo, cb, hi, ratio(cb, ca), (cb-ca)/float64(hi-lo), hi-lo, run.cores, a.AcqPerSec, b.AcqPerSec, ratio(b.AcqPerSec, a.AcqPerSec))
	if peers := peersGrowth(run.rs, c.sys, lo, hi); peers != "" {
		why += " The peers' client CPU per acquisition grew over the same range too, in the same harness: " + peers +
			": more worker processes sharing the same cores cost every library more CPU per acquisition."
	}
	gs.add(what, strings.Join(measured, ", ")+fmt.Sprintf(" (%.2fx)", growth), growth <= cpuGrowth, true, why)
}

func rate(gs *goals, run goalRun, c contender) {
	var v verdict
	var measured []string
	var missed []sized
	what := fmt.Sprintf("1 %s %s: acq/s >= 1.0x %s", c.store, xs(goalSizes), c.peer)
	base := contended(run.rs, c.sys, goalSizes[0])
	if c.peer == "" {
		what = fmt.Sprintf("1 %s %s: acq/s >= %.2fx its own at x%d", c.store, xs(goalSizes[1:]), ownRateMin, goalSizes[0])
		if base != nil {
			measured = append(measured, fmt.Sprintf("x%d %.0f/s", goalSizes[0], base.AcqPerSec))
		} else {
			measured = append(measured, fmt.Sprintf("x%d n/a", goalSizes[0]))
		}
	}
	for _, n := range goalSizes {
		d := contended(run.rs, c.sys, n)
		b, min := base, ownRateMin
		if c.peer != "" {
			b, min = contended(run.rs, c.peer, n), 1.0
		} else if n == goalSizes[0] {
			continue
		}
		if d == nil || b == nil || b.AcqPerSec <= 0 {
			v.see(false, false)
			measured = append(measured, fmt.Sprintf("x%d n/a", n))
			continue
		}
		ok := d.AcqPerSec >= min*b.AcqPerSec
		v.see(true, ok)
		measured = append(measured, fmt.Sprintf("x%d %s", n, ratio(d.AcqPerSec, b.AcqPerSec)))
		if !ok {
			missed = append(missed, sized{n, d, b})
		}
	}
	ok, known := v.ok()
	why := ""
	if len(missed) > 0 {
		why = c.rateWhy(run, missed)
	}
	gs.add(what, strings.Join(measured, ", "), ok, known, why)
}

// each joins a sentence per size.
func each(missed []sized, f func(s sized) string) string {
	var out []string
	for _, s := range missed {
		out = append(out, f(s))
	}
	return upper(strings.Join(out, "; ")) + "."
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// on is the shared setting of the contended reasons: the machine's cores
// and the hold.
func on(run goalRun) string {
	return fmt.Sprintf("On %s cores shared by the workers and the servers, each acquisition held %v. ", run.cores, run.cfg.Hold)
}

func redisRateWhy(run goalRun, missed []sized) string {
	return "A FIFO handoff waits until the one process next in line is scheduled; a spin lock takes whichever process runs " +
		"first, and the herd it leaves shows in its server CPU and its fairness. " + on(run) + each(missed, func(s sized) string {
		return fmt.Sprintf("at %d processes a cycle took %.2f ms against %.2f ms for the spin lock, server CPU per acquisition "+
			"%s the spin lock's, fairness %d/%d against its %d/%d", s.n, cycleMs(s.d), cycleMs(s.b), pratio(s.d.CPUPerAcq, s.b.CPUPerAcq),
			s.d.FairMax, s.d.FairMin, s.b.FairMax, s.b.FairMin)
	})
}

func redlockRateWhy(run goalRun, missed []sized) string {
	return "A release hands the lock to the first waiter in line on every instance, and that waiter holds it on a majority " +
		"of grants without a request of its own; the releaser's next Lock is refused and stands in line. So every acquisition " +
		"waits for another process to be scheduled, where redsync's releaser takes the lock again at once. " + on(run) +
		each(missed, func(s sized) string {
			return fmt.Sprintf("at %d processes a cycle took %.2f ms against %.2f ms for redsync, acquisitions per worker max/min "+
				"%d/%d here, %d/%d there, and the 5 servers' main threads spent %s µs per acquisition here against %s",
				s.n, cycleMs(s.d), cycleMs(s.b), s.d.FairMax, s.d.FairMin, s.b.FairMax, s.b.FairMin, fnum(s.d.CPUPerAcq, 0), fnum(s.b.CPUPerAcq, 0))
		})
}

func etcdRateWhy(run goalRun, missed []sized) string {
	floor := uncRate(run.rs, sysEtcd)
	return fmt.Sprintf("Every acquisition costs etcd two writes (the entry's put and its delete), whatever the lock does: one "+
		"Locker alone, uncontended, did %.0f/s in this run. ", floor) + on(run) + each(missed, func(s sized) string {
		return fmt.Sprintf("at %d processes dlock did %.0f/s (%s of that floor) and concurrency.Mutex %.0f/s, with %s server "+
			"requests per acquisition against %s", s.n, s.d.AcqPerSec, pctOf(s.d.AcqPerSec, floor), s.b.AcqPerSec,
			fnum(s.d.CmdsPerAcq, 1), fnum(s.b.CmdsPerAcq, 1))
	})
}

func zkRateWhy(run goalRun, missed []sized) string {
	return "Both are a line of sequential nodes, each waiter watching the node before its own, and a woken waiter of either " +
		"lists the children once before it holds the lock. Ours also sends an exists request on its own node, alongside its " +
		"first listing: the fencing token (go-zookeeper's Create does not return the node's zxid) and the watch that " +
		"reports the hold's loss. That request is not on the handoff's path; the workers' CPU is, on cores they share. " +
		on(run) + each(missed, func(s sized) string {
		return fmt.Sprintf("at %d processes a cycle took %.2f ms against %.2f ms for zk.Lock, with %s packets per acquisition "+
			"against %s, a handoff p99 of %s against %s ms and the workers' CPU %s against %s µs per acquisition", s.n,
			cycleMs(s.d), cycleMs(s.b), fnum(s.d.CmdsPerAcq, 1), fnum(s.b.CmdsPerAcq, 1), fnum(s.d.HandoffP99, 2),
			fnum(s.b.HandoffP99, 2), fnum(s.d.ClientCPU, 0), fnum(s.b.ClientCPU, 0))
	})
}

func consulRateWhy(run goalRun, missed []sized) string {
	return "api.Lock's releaser, whose next Lock tries at once, takes the lock again before a waiter hears of the release: " +
		"the lock stays in one process, and the others starve. dlock hands it to the next in line, which must hear of the " +
		"release and be scheduled to take it. " + on(run) + each(missed, func(s sized) string {
		return fmt.Sprintf("at %d processes a cycle took %.2f ms against %.2f ms for api.Lock, acquisitions per worker max/min "+
			"%d/%d here, %d/%d there, handoff p99 %s against %s ms, the workers' CPU %s against %s µs per acquisition",
			s.n, cycleMs(s.d), cycleMs(s.b), s.d.FairMax, s.d.FairMin, s.b.FairMax, s.b.FairMin, fnum(s.d.HandoffP99, 2),
			fnum(s.b.HandoffP99, 2), fnum(s.d.ClientCPU, 0), fnum(s.b.ClientCPU, 0))
	})
}

// ownRateWhy explains a rate of file:// or mem:// below its own at the
// fewest processes.
func ownRateWhy(what string) func(goalRun, []sized) string {
	return func(run goalRun, missed []sized) string {
		return what + " " + on(run) + each(missed, func(s sized) string {
			return fmt.Sprintf("at %d processes a cycle took %.2f ms against %.2f ms at %d, handoff p99 %s against %s ms, the "+
				"workers' CPU %s against %s µs per acquisition", s.n, cycleMs(s.d), cycleMs(s.b), goalSizes[0],
				fnum(s.d.HandoffP99, 2), fnum(s.b.HandoffP99, 2), fnum(s.d.ClientCPU, 0), fnum(s.b.ClientCPU, 0))
		})
	}
}

// hotKey checks goal 2: on Redis, dlock's rate beside the spin lock's with
// a wait p99 at most a quarter of the spin lock's.
func hotKey(gs *goals, run goalRun) {
	for _, n := range hotKeySizes {
		what := fmt.Sprintf("2 Redis hot key x%d: acq/s >= 1.0x bare spin lock, wait p99 <= 1/4 of its", n)
		d, b := contended(run.rs, sysRedis, n), contended(run.rs, sysBare, n)
		if d == nil || b == nil || b.AcqPerSec <= 0 {
			gs.add(what, "n/a", false, false, "")
			continue
		}
		rateOK, tailOK := d.AcqPerSec >= b.AcqPerSec, d.WaitP99 <= b.WaitP99/4
		var why []string
		if !rateOK {
			why = append(why, redisRateWhy(run, []sized{{n, d, b}}),
				"Barging (sync.Mutex's trade) was built and measured, and ran slower than the line: see \"There is no barging mode\" in the redis package doc.")
		}
		if !tailOK {
			bound := float64(n)*cycleMs(d) + float64(run.cfg.Hold)/float64(time.Millisecond)
			why = append(why, fmt.Sprintf("The queue bounds a wait by about %d cycles: %d x the measured cycle %.2f ms + the hold = "+
				"%.1f ms; the p99 is %.1f ms against the spin lock's %.1f ms, whose quarter is %.1f ms.",
				n, n, cycleMs(d), bound, d.WaitP99, b.WaitP99, b.WaitP99/4))
		}
		gs.add(what, fmt.Sprintf("%s acq/s; wait p99 %.1f against %.1f ms (%s)", ratio(d.AcqPerSec, b.AcqPerSec), d.WaitP99, b.WaitP99,
			ratio(d.WaitP99, b.WaitP99)), rateOK && tailOK, true, strings.Join(why, " "))
	}
}

// peersGrowth lists, for each peer of sys (a system of another library on
// the same store) with client CPU at lo and hi processes, how much its
// client CPU per acquisition grew from lo to hi.
func peersGrowth(rs []Result, sys string, lo, hi int) string {
	store := ""
	for _, s := range systems {
		if s.name == sys {
			store = s.store
		}
	}
	var out []string
	for _, s := range systems {
		if s.dlock || s.store != store || s.uncontendedOnly {
			continue
		}
		a, b := contended(rs, s.name, lo), contended(rs, s.name, hi)
		if a == nil || b == nil || a.ClientCPU == nil || b.ClientCPU == nil || *a.ClientCPU <= 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s %.0f to %.0f µs (%.2fx)", s.name, *a.ClientCPU, *b.ClientCPU, *b.ClientCPU / *a.ClientCPU))
	}
	return strings.Join(out, ", ")
}
