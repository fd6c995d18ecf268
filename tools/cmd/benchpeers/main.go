// Command benchpeers runs dlock beside its peers (a bare SET NX PX spin
// lock, the same with an INCR fencing token as a reference, bsm/redislock,
// go-redsync/redsync, etcd's concurrency.Mutex, go-zookeeper's Lock,
// Consul's api.Lock) on the servers named by the DLOCK_*_URL environment
// (scripts/with-servers.sh sets it) and writes BENCHMARKS.md. `make
// bench-peers` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/tools/internal/benchpeers"
)

func main() {
	if benchpeers.RunWorkerIfAsked() {
		return
	}
	var (
		out      = flag.String("out", "BENCHMARKS.md", "markdown report to write")
		jsonOut  = flag.String("json", "", "also write the results as JSON here")
		reps     = flag.Int("reps", 3, "repetitions of the timed scenarios (medians)")
		dur      = flag.Duration("duration", 2*time.Second, "each timed run")
		parallel = flag.Int("parallel", 16, "parallel-keys goroutines")
		lockers  = flag.String("lockers", "2,8,32", "contended worker processes")
		hold     = flag.Duration("hold", time.Millisecond, "contended hold")
		holds    = flag.Int("holds", 100000, "many-holds keys (issue 45 asks for 100,000)")
		holdFor  = flag.Duration("hold-for", 10*time.Second, "many-holds: how long all are kept")
		ttls     = flag.String("hold-ttls", "default,3s", "many-holds TTLs")
		budget   = flag.Duration("acquire-budget", 150*time.Second, "many-holds: time allowed to acquire them")
		systems  = flag.String("systems", "", "comma-separated substrings of system names (default all)")
		wprof    = flag.String("worker-cpuprofile", "", "contended: a directory where each worker process writes the CPU profile of its timed window")
		scens    = flag.String("scenarios", "", "comma-separated: uncontended,parallel-keys,uncontended-paired,contended,many-holds (default all)")
		command  = flag.String("command", "", "the command line to print in the report (default: this one)")
		note     = flag.String("note", "", "a note printed at the top of the report")
		mem      = flag.Bool("mem", true, "include dlock mem://")
		fileDir  = flag.Bool("file", true, "include dlock file:// (a lock directory made for the run and removed after)")
		render   = flag.String("render", "", "run nothing: write the report from the results of an earlier -json")
		cpuProf  = flag.String("cpuprofile", "", "write this process's CPU profile here (the workers of contended runs are other processes)")
		memProf  = flag.String("memprofile", "", "many-holds: write the heap profile taken while all are held here, the system and TTL added to the name")
	)
	flag.Parse()
	if *wprof != "" {
		// The workers inherit this process's environment.
		dir, err := filepath.Abs(*wprof)
		if err == nil {
			err = os.MkdirAll(dir, 0o755)
		}
		if err == nil {
			err = os.Setenv(benchpeers.WorkerProfileEnv, dir)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchpeers: -worker-cpuprofile:", err)
			os.Exit(2)
		}
	}
	if *render != "" {
		meta, rs := readResults(*render)
		writeReport(*out, meta, rs)
		return
	}
	if *cpuProf != "" {
		pf, err := os.Create(*cpuProf)
		if err != nil {
			fail("%v", err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			fail("%v", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = pf.Close()
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	cfg := benchpeers.Config{
		Endpoints: benchpeers.Endpoints{
			Redis: os.Getenv("DLOCK_REDIS_URL"), Redlock: os.Getenv("DLOCK_REDLOCK_URL"),
			Etcd: os.Getenv("DLOCK_ETCD_URL"), ZK: os.Getenv("DLOCK_ZK_URL"),
			Consul: os.Getenv("DLOCK_CONSUL_URL"), Mem: *mem,
		},
		Systems: split(*systems), Scenarios: split(*scens),
		Reps: *reps, Duration: *dur, Parallel: *parallel, Hold: *hold,
		Holds: *holds, HoldFor: *holdFor, AcquireBudget: *budget, HeapProfile: *memProf,
		Log: os.Stderr,
	}
	for _, s := range split(*lockers) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fail("bad -lockers %q", *lockers)
		}
		cfg.Lockers = append(cfg.Lockers, n)
	}
	for _, s := range split(*ttls) {
		if s == "default" {
			cfg.HoldTTLs = append(cfg.HoldTTLs, 0)
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			fail("bad -hold-ttls %q", *ttls)
		}
		cfg.HoldTTLs = append(cfg.HoldTTLs, d)
	}
	var lockDir string
	if *fileDir {
		dir, err := os.MkdirTemp("", "dlock-benchpeers-")
		if err != nil {
			fail("lock directory: %v", err)
		}
		lockDir, cfg.Endpoints.File = dir, "file://"+dir
	}
	meta := benchpeers.Meta{Command: *command, Started: time.Now(), Machine: benchpeers.Machine(),
		Servers: benchpeers.ServerVersions(ctx, cfg.Endpoints), Note: *note, Config: cfg}
	if meta.Command == "" {
		meta.Command = strings.Join(os.Args, " ")
	}
	rs := benchpeers.Run(ctx, cfg)
	meta.Finished = time.Now()
	if lockDir != "" {
		_ = os.RemoveAll(lockDir)
	}
	writeReport(*out, meta, rs)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results{meta, rs}, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			fail("%v", err)
		}
	}
	fmt.Fprintf(os.Stderr, "benchpeers: wrote %s\n", *out)
	if benchpeers.Overlapped(rs) {
		fail("two holders overlapped in a contended run: see %s", *out)
	}
}

// results is the JSON that -json writes and -render reads.
type results struct {
	Meta    benchpeers.Meta     `json:"meta"`
	Results []benchpeers.Result `json:"results"`
}

func readResults(path string) (benchpeers.Meta, []benchpeers.Result) {
	b, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	var r results
	if err := json.Unmarshal(b, &r); err != nil {
		fail("%s: %v", path, err)
	}
	return r.Meta, r.Results
}

func writeReport(path string, meta benchpeers.Meta, rs []benchpeers.Result) {
	f, err := os.Create(path)
	if err != nil {
		fail("%v", err)
	}
	benchpeers.WriteMarkdown(f, meta, rs)
	if err := f.Close(); err != nil {
		fail("%v", err)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "benchpeers: "+format+"\n", a...)
	os.Exit(1)
}
