package benchpeers

import (
	"fmt"
	"io"
)

// The systems the goals of issue 45 name.
const (
	sysBare      = "bare SET NX PX spin lock, 10 ms retry"
	sysFenced    = "fenced SET NX PX spin lock (INCR token), 10 ms retry"
	sysRedis     = "dlock redis://"
	sysRedislock = "bsm/redislock, 10 ms retry"
	sysRedsyncRL = "redsync Redlock (5 masters)"
	sysRedlock   = "dlock redlock:// (5 masters)"
	sysEtcdMutex = "etcd concurrency.Mutex"
	sysEtcd      = "dlock etcd://"
	sysZKLock    = "go-zookeeper zk.Lock"
	sysZK        = "dlock zk://"
	sysConsulAPI = "Consul api.Lock"
	sysConsul    = "dlock consul://"
	sysFile      = "dlock file://"
	sysMem       = "dlock mem://"
)

// goal is one checked target of issue 45. met is nil when the run lacks
// the figure (n/a); why, for a target this run did not meet, gives the
// reason with the figures of this run that show it.
type goal struct {
	what     string
	measured string
	met      *bool
	why      string
}

// goals collects the targets as they are checked.
type goals []goal

func (gs *goals) add(what, measured string, ok, known bool, why string) {
	g := goal{what: what, measured: measured}
	if known {
		g.met = &ok
	}
	if known && !ok {
		g.why = why
	}
	*gs = append(*gs, g)
}

// status is how the report shows a goal's outcome.
func (g goal) status() string {
	if g.met == nil {
		return "n/a"
	}
	if *g.met {
		return "met"
	}
	return "**not met**"
}

// goalRun is what the checks read: the run's configuration, the machine's
// cores and the results.
type goalRun struct {
	cfg   Config
	cores string
	rs    []Result
}

// cycleMs is the time between two acquisitions of a contended key.
func cycleMs(r *Result) float64 {
	if r.AcqPerSec <= 0 {
		return 0
	}
	return 1000 / r.AcqPerSec
}

// uncRate is a system's uncontended acquisitions per second (0 when not run).
func uncRate(rs []Result, sys string) float64 {
	if r := find(rs, ScenUncontended, sys, 0, ""); r != nil {
		return r.AcqPerSec
	}
	return 0
}

// pctOf is a as a percentage of b.
func pctOf(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

// writeGoals writes the goals of issue 45, each checked against this run.
func writeGoals(w io.Writer, meta Meta, rs []Result) {
	run := goalRun{cfg: meta.Config, cores: meta.Machine["nproc"], rs: rs}
	var gs goals
	noCollapse(&gs, run)
	hotKey(&gs, run)
	uncontended(&gs, run)
	redlockHolds(&gs, run)
	manyHolds(&gs, run)

	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## goals of issue 45 (targets against this run)\n\n")
	p("Ratios are taken in this run, beside the peer. A target not met says why, with the figures of this run that\n")
	p("show it; n/a: the run lacks the figure (the system, the number of processes or the count of holds was not run,\n")
	p("or its run failed: see the error column above).\n\n")
	p("| goal | measured | status | why not met (figures of this run) |\n|---|--:|---|---|\n")
	for _, g := range gs {
		p("| %s | %s | %s | %s |\n", g.what, g.measured, g.status(), g.why)
	}
	p("\nGoal 1 reads the contended tables at %s processes: fairness is the most and fewest acquisitions of one\n", xs(goalSizes))
	p("worker (medians over the repetitions); acq/s is dlock's over its peer's at the same number of processes\n")
	p("(file:// and mem://, which have none: over their own at %d); client CPU is compared between %d and %d processes.\n",
		goalSizes[0], goalSizes[0], goalSizes[len(goalSizes)-1])
}
