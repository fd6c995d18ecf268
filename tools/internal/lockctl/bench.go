package lockctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
)

const benchHelp = `Usage: lockctl bench --backend URL [--backend URL ...] [flags]

Compares lock backends on evidence: every scenario runs against every
backend, one after the other, in one run.

  lockctl bench --backend mem:// --backend redis://127.0.0.1:6379 --backend etcd://127.0.0.1:2379 --html report.html

Scenarios (--scenario, repeatable; default all):
  uncontended    ` + "one goroutine, one key: Lock+Unlock in a loop (latency of a free lock)" + `
  parallel-keys  ` + "--parallel goroutines on one Locker, a key each (throughput over many keys)" + `
  contended      ` + "--contenders goroutines over 2 Lockers on one key, holding it --hold" + `
                 ` + "each time; handoff = from a holder's Unlock to the next Lock returning" + `

Each scenario runs for --duration (or --iterations acquisitions, if fewer).
The table gives acquisitions per second, the latency of Lock (p50, p99),
the handoff latency (contended), and backend requests per acquisition,
counted on the servers where lockctl knows how (Redis: INFO commandstats;
etcd: /metrics; ZooKeeper: mntr) and n/a elsewhere. Those counts are
server-wide: other clients of the same servers inflate them.

A progress bar is drawn on stderr when it is a terminal. --json prints the
results as JSON instead of the table; --html writes a self-contained report
with charts (no scripts, no network).
`

// benchConfig is a parsed lockctl bench command line.
type benchConfig struct {
	urls       []string
	scenarios  []string
	duration   time.Duration
	iterations int
	parallel   int
	contenders int
	hold       time.Duration
	ttl        time.Duration
	html       string
	json       bool
	metrics    *metrics // --metrics: the lock figures of every backend, printed at exit
}

// benchResult is one scenario against one backend.
type benchResult struct {
	Backend      string  `json:"backend"`
	Scenario     string  `json:"scenario"`
	Goroutines   int     `json:"goroutines"`
	Acquisitions int64   `json:"acquisitions"`
	Seconds      float64 `json:"seconds"`
	OpsPerSec    float64 `json:"acquisitions_per_sec"`
	LockP50      float64 `json:"lock_p50_ms"`
	LockP99      float64 `json:"lock_p99_ms"`
	// HandoffP50 and HandoffP99 are set for the contended scenario.
	HandoffP50 *float64 `json:"handoff_p50_ms,omitempty"`
	HandoffP99 *float64 `json:"handoff_p99_ms,omitempty"`
	// RequestsPerAcq is nil where requests cannot be counted.
	RequestsPerAcq *float64 `json:"requests_per_acquisition,omitempty"`
	RequestsWhat   string   `json:"requests_counted,omitempty"`
	Error          string   `json:"error,omitempty"`
}

// benchReport is a whole run, as --json prints it and --html draws it.
type benchReport struct {
	Started    time.Time     `json:"started"`
	Host       string        `json:"host"`
	Go         string        `json:"go"`
	CPUs       int           `json:"cpus"`
	Duration   string        `json:"duration_per_scenario"`
	Iterations int           `json:"iterations_limit,omitempty"`
	Parallel   int           `json:"parallel_goroutines"`
	Contenders int           `json:"contended_goroutines"`
	Hold       string        `json:"contended_hold"`
	Results    []benchResult `json:"results"`
}

func benchMain(ctx context.Context, args []string, sys IO) int {
	cfg, code, ok := parseBench(args, sys)
	if !ok {
		return code
	}
	// Check every URL before spending time on any of them.
	for _, u := range cfg.urls {
		l, err := open(ctx, u)
		if err != nil {
			return fail(sys.Stderr, err)
		}
		_ = l.Close()
	}
	rep := runBench(ctx, cfg, newProgress(sys.Stderr, cfg))
	if cfg.metrics != nil {
		cfg.metrics.print(sys.Stderr)
	}
	if cfg.json {
		if err := writeJSON(sys.Stdout, rep); err != nil {
			return fail(sys.Stderr, err)
		}
	} else {
		writeTable(sys.Stdout, rep)
	}
	if cfg.html != "" {
		if err := writeHTMLFile(cfg.html, rep); err != nil {
			return fail(sys.Stderr, fmt.Errorf("--html: %w", err))
		}
		if !cfg.json {
			fmt.Fprintf(sys.Stdout, "\nreport written to %s\n", cfg.html)
		}
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			return ExitBackend
		}
	}
	return 0
}

func parseBench(args []string, sys IO) (benchConfig, int, bool) {
	cfg := benchConfig{}
	var urls, scens listValue
	fs := newFlags("bench", benchHelp, sys)
	fs.Var(&urls, "backend", "backend `URL` to measure; repeat for each backend")
	fs.Var(&scens, "scenario", "`name` of a scenario to run; repeatable (default: all)")
	fs.DurationVar(&cfg.duration, "duration", 2*time.Second, "how long each scenario runs against each backend")
	fs.IntVar(&cfg.iterations, "iterations", 0, "stop a scenario after this many acquisitions if that comes first (0: no limit)")
	fs.IntVar(&cfg.parallel, "parallel", 8, "goroutines of parallel-keys")
	fs.IntVar(&cfg.contenders, "contenders", 8, "goroutines of contended")
	fs.DurationVar(&cfg.hold, "hold", time.Millisecond, "how long contended holds the lock each time")
	fs.DurationVar(&cfg.ttl, "ttl", 0, "lease of the locks (default: the URL's ttl=, else 30s)")
	fs.StringVar(&cfg.html, "html", "", "write a self-contained HTML report with charts to `FILE`")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON instead of the table")
	withMetrics := fs.Bool("metrics", false, "also print dlock's lock figures per backend (wait, hold, renewals, losses) on stderr")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return cfg, code, false
	}
	cfg.urls, cfg.scenarios = urls, scens
	if *withMetrics {
		cfg.metrics = newMetrics()
	}
	if len(cfg.scenarios) == 0 {
		cfg.scenarios = allScenarios
	}
	switch {
	case fs.NArg() > 0:
		return cfg, usageError(sys.Stderr, "bench: unexpected argument %q (backends are given with --backend)", fs.Arg(0)), false
	case len(cfg.urls) == 0:
		return cfg, usageError(sys.Stderr, "bench: give at least one --backend URL (see lockctl bench --help)"), false
	case cfg.duration <= 0:
		return cfg, usageError(sys.Stderr, "bench: --duration %v: want a positive duration", cfg.duration), false
	case cfg.iterations < 0:
		return cfg, usageError(sys.Stderr, "bench: --iterations %d: want 0 or more", cfg.iterations), false
	case cfg.parallel < 1 || cfg.parallel > 10000:
		return cfg, usageError(sys.Stderr, "bench: --parallel %d: want 1 to 10000", cfg.parallel), false
	case cfg.contenders < 2 || cfg.contenders > 10000:
		return cfg, usageError(sys.Stderr, "bench: --contenders %d: want 2 to 10000", cfg.contenders), false
	case cfg.hold < 0:
		return cfg, usageError(sys.Stderr, "bench: --hold %v: want a duration >= 0", cfg.hold), false
	case cfg.ttl < 0:
		return cfg, usageError(sys.Stderr, "bench: --ttl %v: want a positive duration", cfg.ttl), false
	}
	for _, s := range cfg.scenarios {
		if !slices.Contains(allScenarios, s) {
			return cfg, usageError(sys.Stderr, "bench: unknown scenario %q (scenarios: %s)", s, strings.Join(allScenarios, ", ")), false
		}
	}
	seen := map[string]bool{}
	for _, u := range cfg.urls {
		if seen[u] {
			return cfg, usageError(sys.Stderr, "bench: --backend %s given twice", redact(u)), false
		}
		seen[u] = true
	}
	return cfg, 0, true
}

// runBench runs every scenario against every backend.
func runBench(ctx context.Context, cfg benchConfig, p *progress) benchReport {
	host, _ := os.Hostname()
	rep := benchReport{
		Started: time.Now(), Host: host, Go: runtime.Version(), CPUs: runtime.NumCPU(),
		Duration: cfg.duration.String(), Iterations: cfg.iterations,
		Parallel: cfg.parallel, Contenders: cfg.contenders, Hold: cfg.hold.String(),
	}
	keyBase := "lockctl-bench/" + randomHex(6)
	for _, scen := range cfg.scenarios {
		for _, u := range cfg.urls {
			p.begin(redact(u), scen)
			rep.Results = append(rep.Results, benchOne(ctx, cfg, u, scen, keyBase, p))
			p.end()
		}
	}
	p.finish()
	return rep
}

// benchOne runs one scenario against one backend.
func benchOne(ctx context.Context, cfg benchConfig, url, scen, keyBase string, p *progress) benchResult {
	r := benchResult{Backend: redact(url), Scenario: scen, Goroutines: 1}
	switch scen {
	case scenParallelKeys:
		r.Goroutines = cfg.parallel
	case scenContended:
		r.Goroutines = cfg.contenders
	}
	counter := newRequestCounter(url)
	var before uint64
	if counter != nil {
		defer counter.close()
		r.RequestsWhat = counter.what()
	}
	onStart := func() {
		p.start()
		if counter == nil {
			return
		}
		var err error
		if before, err = counter.count(ctx); err != nil {
			counter, r.RequestsWhat = nil, fmt.Sprintf("n/a: %v", err)
		}
	}
	newLocker := func() (*dlock.Locker, error) {
		if cfg.metrics != nil {
			return open(ctx, url, dlock.WithObserver(cfg.metrics))
		}
		return open(ctx, url)
	}
	res, err := runScenario(ctx, scen, cfg, newLocker, keyBase, onStart)
	if err != nil {
		r.Error = err.Error()
		if errors.Is(err, context.Canceled) {
			r.Error = "interrupted"
		}
	}
	r.Acquisitions, r.Seconds = res.ops, res.elapsed.Seconds()
	if res.elapsed > 0 {
		r.OpsPerSec = float64(res.ops) / res.elapsed.Seconds()
	}
	r.LockP50, r.LockP99 = ms(res.lockP50), ms(res.lockP99)
	if scen == scenContended && res.handoffP50 > 0 {
		p50, p99 := ms(res.handoffP50), ms(res.handoffP99)
		r.HandoffP50, r.HandoffP99 = &p50, &p99
	}
	if counter != nil && res.ops > 0 && err == nil {
		if after, cerr := counter.count(ctx); cerr == nil && after >= before {
			per := float64(after-before) / float64(res.ops)
			r.RequestsPerAcq = &per
		}
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
