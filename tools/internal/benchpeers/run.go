package benchpeers

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// Scenarios, in report order.
const (
	ScenUncontended = "uncontended"
	ScenParallel    = "parallel-keys"
	ScenContended   = "contended"
	ScenManyHolds   = "many-holds"
)

// Config is one run of the harness.
type Config struct {
	Endpoints Endpoints     `json:"-"` // addresses may carry credentials
	Systems   []string      // substrings of system names to run; empty: all available
	Scenarios []string      // empty: all
	Reps      int           // repetitions of the timed scenarios, interleaved; medians reported
	Duration  time.Duration // each uncontended, parallel-keys and contended run
	Parallel  int           // goroutines (a key each) in parallel-keys
	Lockers   []int         // contended: worker processes, one Locker each
	Hold      time.Duration // contended: how long each acquisition is held
	Holds     int           // many-holds: keys held through one Locker
	HoldFor   time.Duration // many-holds: how long they are kept once all are held
	HoldTTLs  []time.Duration
	// AcquireBudget bounds acquiring the many holds; what is held by then
	// is measured.
	AcquireBudget time.Duration
	// HeapProfile, when set, is where each many-holds run writes the
	// process's heap profile at the moment its heap is measured (while all
	// are held), the system and TTL added to the name: what the holds and
	// their renewals keep alive.
	HeapProfile string    `json:"-"`
	Log         io.Writer `json:"-"` // progress; nil: none
}

// Result is one scenario of one system in one repetition (or, after
// aggregation, the medians over the repetitions).
type Result struct {
	Scenario string `json:"scenario"`
	System   string `json:"system"`
	Lockers  int    `json:"lockers,omitempty"` // contended: worker processes
	Peer     string `json:"peer,omitempty"`    // uncontended-paired: the peer run in alternation with System
	TTL      string `json:"ttl,omitempty"`     // many-holds
	Reps     int    `json:"reps"`

	Acquisitions int64    `json:"acquisitions"`
	Seconds      float64  `json:"seconds"`
	AcqPerSec    float64  `json:"acq_per_sec"`
	WaitP50      float64  `json:"wait_p50_ms"`
	WaitP99      float64  `json:"wait_p99_ms"`
	HandoffP99   *float64 `json:"handoff_p99_ms,omitempty"`
	FairMax      int64    `json:"fair_max,omitempty"`
	FairMin      int64    `json:"fair_min,omitempty"`
	CmdsPerAcq   *float64 `json:"server_requests_per_acq,omitempty"`
	UsecPerAcq   *float64 `json:"server_usec_per_acq,omitempty"`     // Redis commandstats usec
	CPUPerAcq    *float64 `json:"server_cpu_usec_per_acq,omitempty"` // Redis main-thread CPU (INFO cpu), µs
	RTPerAcq     *float64 `json:"round_trips_per_acq,omitempty"`
	ClientCPU    *float64 `json:"client_cpu_usec_per_acq,omitempty"` // the client's CPU, µs: contended, the worker processes'; uncontended and parallel-keys, this process's
	// uncontended and parallel-keys: this process's heap allocations
	// (runtime.MemStats Mallocs and TotalAlloc) per Lock+Unlock
	Allocs      *float64 `json:"allocs_per_acq,omitempty"`
	AllocBytes  *float64 `json:"alloc_bytes_per_acq,omitempty"`
	Overlaps    int      `json:"overlaps"`               // contended: holds that began before the previous one ended
	WarmRetries int      `json:"warm_retries,omitempty"` // contended: workers' warm-ups tried again (see warmUp)
	WarmErr     string   `json:"warm_error,omitempty"`   // the first of those warm-ups' errors

	// many-holds
	Holds             int      `json:"holds,omitempty"`
	Held              int      `json:"held,omitempty"`
	AcquireSeconds    float64  `json:"acquire_seconds,omitempty"`
	ReleaseSeconds    float64  `json:"release_seconds,omitempty"` // Unlock of all held, 32 at a time
	ReleaseErrors     int      `json:"release_errors,omitempty"`  // Unlocks that failed other than with ErrLockLost
	GoroutinesPerHold float64  `json:"goroutines_per_hold,omitempty"`
	HeapPerHold       float64  `json:"heap_bytes_per_hold,omitempty"`
	Lost              int      `json:"lost,omitempty"`
	LostAcquiring     int      `json:"lost_acquiring,omitempty"` // of Lost, those lost before the last was acquired
	RenewRTPerHoldSec *float64 `json:"renew_round_trips_per_hold_per_sec,omitempty"`
	// while all were held: the CPU this process used, and the Redis
	// servers' main threads (where known), in cores (CPU seconds a second)
	HeldClientCores *float64 `json:"held_client_cores,omitempty"`
	HeldServerCores *float64 `json:"held_server_cores,omitempty"`

	// uncontended-paired: the peer's rate over its blocks, and System's
	// rate over the peer's for each pair of blocks
	PeerAcqPerSec float64   `json:"peer_acq_per_sec,omitempty"`
	BlockRatios   []float64 `json:"block_ratios,omitempty"`

	Error string `json:"error,omitempty"`
}

// counter samples a store's server-side request count (and, on Redis,
// the servers' command time from commandstats, and the CPU time of their
// main threads from INFO cpu, in µs).
type counter interface {
	sample(ctx context.Context) (calls, usec, cpu uint64, err error)
	close()
}

type redisCounter struct{ cs []*goredis.Client }

func (r redisCounter) sample(ctx context.Context) (calls, usec, cpu uint64, err error) {
	for _, c := range r.cs {
		info, err := c.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return 0, 0, 0, err
		}
		sc := bufio.NewScanner(strings.NewReader(info))
		for sc.Scan() {
			name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
			if ok && (name == "used_cpu_sys_main_thread" || name == "used_cpu_user_main_thread") {
				s, _ := strconv.ParseFloat(rest, 64)
				cpu += uint64(s * 1e6)
				continue
			}
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			switch strings.TrimPrefix(name, "cmdstat_") {
			case "info", "hello", "client|setinfo", "client|setname", "auth", "select":
				continue
			}
			for _, f := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(f, "=")
				n, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					calls += uint64(n)
				case "usec":
					usec += uint64(n)
				}
			}
		}
	}
	return calls, usec, cpu, nil
}

func (r redisCounter) close() { _ = closeAll(r.cs) }

type lockctlCounter struct{ c *lockctl.RequestCounter }

func (l lockctlCounter) sample(ctx context.Context) (uint64, uint64, uint64, error) {
	n, err := l.c.Count(ctx)
	return n, 0, 0, err
}
func (l lockctlCounter) close() { l.c.Close() }

// newCounter returns the counter of a store, or nil where none is known
// (Consul, memory).
func newCounter(store string, ep Endpoints) counter {
	switch store {
	case "redis", "redlock":
		u := ep.Redis
		if store == "redlock" {
			u = ep.Redlock
		}
		hs, err := hosts(u, "6379")
		if err != nil {
			return nil
		}
		var cs []*goredis.Client
		for _, h := range hs {
			cs = append(cs, goredis.NewClient(&goredis.Options{Addr: h}))
		}
		return redisCounter{cs}
	case "etcd", "zk":
		u := ep.Etcd
		if store == "zk" {
			u = ep.ZK
		}
		if c := lockctl.NewRequestCounter(u); c != nil {
			return lockctlCounter{c}
		}
	}
	return nil
}

// countWindow takes the counter before and after f and sets the
// per-acquisition figures of r from the difference.
func countWindow(ctx context.Context, c counter, r *Result, f func()) {
	if c == nil {
		f()
		return
	}
	c0, u0, p0, err0 := c.sample(ctx)
	f()
	c1, u1, p1, err1 := c.sample(ctx)
	if err0 != nil || err1 != nil || r.Acquisitions == 0 {
		return
	}
	v := float64(c1-c0) / float64(r.Acquisitions)
	r.CmdsPerAcq = &v
	if u1 > 0 {
		u := float64(u1-u0) / float64(r.Acquisitions)
		r.UsecPerAcq = &u
	}
	if p1 > 0 {
		p := float64(p1-p0) / float64(r.Acquisitions)
		r.CPUPerAcq = &p
	}
}

func (cfg Config) logf(format string, args ...any) {
	if cfg.Log != nil {
		fmt.Fprintf(cfg.Log, format+"\n", args...)
	}
}

func (cfg Config) wants(scen string) bool {
	return len(cfg.Scenarios) == 0 || slices.Contains(cfg.Scenarios, scen)
}

// selected returns the systems the run covers, in report order.
func (cfg Config) selected() []system {
	var out []system
	for _, s := range systems {
		if !s.available(cfg.Endpoints) {
			continue
		}
		if len(cfg.Systems) > 0 && !slices.ContainsFunc(cfg.Systems, func(p string) bool { return strings.Contains(s.name, p) }) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// Run runs every selected scenario against every selected system and
// returns the results, the timed ones as medians over cfg.Reps
// repetitions run interleaved (repetition r of every system before
// repetition r+1 of any).
func Run(ctx context.Context, cfg Config) []Result {
	if cfg.Reps < 1 {
		cfg.Reps = 1
	}
	syss := cfg.selected()
	var raw []Result
	for rep := 1; rep <= cfg.Reps; rep++ {
		for _, s := range syss {
			if cfg.wants(ScenUncontended) {
				cfg.logf("rep %d: %s: %s", rep, ScenUncontended, s.name)
				raw = append(raw, runLocal(ctx, cfg, s, ScenUncontended, 1))
			}
			if s.uncontendedOnly {
				continue
			}
			if cfg.wants(ScenParallel) {
				cfg.logf("rep %d: %s: %s", rep, ScenParallel, s.name)
				raw = append(raw, runLocal(ctx, cfg, s, ScenParallel, cfg.Parallel))
			}
			if cfg.wants(ScenContended) {
				for _, n := range cfg.Lockers {
					cfg.logf("rep %d: %s x%d: %s", rep, ScenContended, n, s.name)
					raw = append(raw, runContended(ctx, cfg, s, n))
				}
			}
		}
		if cfg.wants(ScenPaired) {
			for _, p := range pairs(syss) {
				cfg.logf("rep %d: %s: %s and %s", rep, ScenPaired, p.dlock.name, p.peer.name)
				raw = append(raw, runPaired(ctx, cfg, p))
			}
		}
	}
	out := aggregate(raw)
	if cfg.wants(ScenManyHolds) {
		// Run system by system in manyHoldsOrder, then report in the
		// usual order: by TTL, then as the systems are listed.
		type run struct {
			r        Result
			ttl, sys int
		}
		var runs []run
		for _, i := range manyHoldsOrder(syss) {
			s := syss[i]
			for t, ttl := range cfg.HoldTTLs {
				cfg.logf("%s %d ttl=%v: %s", ScenManyHolds, cfg.Holds, ttl, s.name)
				runs = append(runs, run{runManyHolds(ctx, cfg, s, ttl), t, i})
			}
		}
		slices.SortStableFunc(runs, func(a, b run) int { return cmp.Or(cmp.Compare(a.ttl, b.ttl), cmp.Compare(a.sys, b.sys)) })
		for _, r := range runs {
			out = append(out, r.r)
		}
	}
	return out
}

// manyHoldsOrder gives the indexes in syss of the systems many-holds runs,
// in the order it runs them: each system at every TTL before the next,
// Consul's runs next to last and ZooKeeper's last. Both stores go on
// working after a run has released its holds: ZooKeeper removes the
// empty key containers it left at its own pace (10,000 a minute by
// default, so ten minutes for 100,000 keys), and Consul cleans up after
// the sessions. Taken in the listed order, that work used about 0.1 of
// the machine's 2 cores through the Redlock and file runs at a 3s TTL,
// which need all the rest (one such run took 86,148 Redlock holds within
// the budget and lost 9,667). It is one disturbance among others: on
// quiet servers, Redlock runs at 3s still keep every hold in some runs
// and lose tens of thousands in others.
func manyHoldsOrder(syss []system) []int {
	var idx []int
	for i, s := range syss {
		if s.dlock && !s.uncontendedOnly {
			idx = append(idx, i)
		}
	}
	last := func(store string) int {
		switch store {
		case "consul":
			return 1
		case "zk":
			return 2
		}
		return 0
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(last(syss[a].store), last(syss[b].store)) })
	return idx
}

// runLocal is uncontended (one goroutine, one key) or parallel-keys (n
// goroutines, a key each), through one client.
func runLocal(ctx context.Context, cfg Config, s system, scen string, n int) Result {
	r := Result{Scenario: scen, System: s.name, Reps: 1}
	c, err := s.open(ctx, cfg.Endpoints, 0)
	if err != nil {
		r.Error = "open: " + err.Error()
		return r
	}
	defer c.close()
	key := fmt.Sprintf("%s-%d", scen, time.Now().UnixNano())
	for g := range n {
		if err := lockUnlock(ctx, c, key+"-"+strconv.Itoa(g)); err != nil {
			r.Error = "warm-up: " + err.Error()
			return r
		}
	}
	cnt := newCounter(s.store, cfg.Endpoints)
	if cnt != nil {
		defer cnt.close()
	}
	var (
		mu    sync.Mutex
		waits []time.Duration
		errs  []error
		total atomic.Int64
	)
	rt0 := c.roundTrips()
	var (
		elapsed  time.Duration
		cpu      time.Duration
		ms0, ms1 runtime.MemStats
	)
	countWindow(ctx, cnt, &r, func() {
		runtime.ReadMemStats(&ms0)
		cpu0 := processCPU()
		start := time.Now()
		until := start.Add(cfg.Duration)
		var wg sync.WaitGroup
		for g := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := key + "-" + strconv.Itoa(g)
				var local []time.Duration
				for time.Now().Before(until) {
					t0 := time.Now()
					lctx, cancel := context.WithTimeout(ctx, time.Minute)
					unlock, err := c.lock(lctx, k)
					if err == nil {
						local = append(local, time.Since(t0))
						err = unlock(lctx)
					}
					cancel()
					if err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
						break
					}
					total.Add(1)
				}
				mu.Lock()
				waits = append(waits, local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		elapsed = time.Since(start)
		cpu = processCPU() - cpu0
		runtime.ReadMemStats(&ms1)
		r.Acquisitions = total.Load()
	})
	if n := float64(r.Acquisitions); n > 0 {
		c, a, b := float64(cpu.Microseconds())/n, float64(ms1.Mallocs-ms0.Mallocs)/n, float64(ms1.TotalAlloc-ms0.TotalAlloc)/n
		r.ClientCPU, r.Allocs, r.AllocBytes = &c, &a, &b
	}
	if rt0 >= 0 && r.Acquisitions > 0 {
		v := float64(c.roundTrips()-rt0) / float64(r.Acquisitions)
		r.RTPerAcq = &v
	}
	r.Seconds = elapsed.Seconds()
	r.AcqPerSec = float64(r.Acquisitions) / r.Seconds
	r.WaitP50, r.WaitP99 = pct(waits, 50), pct(waits, 99)
	if len(errs) > 0 {
		r.Error = errs[0].Error()
	}
	return r
}

// runContended starts n workers, each its own process (mem://: its own
// goroutine) with its own client, contending for one key, and merges what
// they report.
func runContended(ctx context.Context, cfg Config, s system, n int) Result {
	r := Result{Scenario: ScenContended, System: s.name, Lockers: n, Reps: 1}
	key := fmt.Sprintf("contended-%d-%d", n, time.Now().UnixNano())
	var ws []*worker
	defer func() {
		for _, w := range ws {
			w.kill()
		}
	}()
	for i := range n {
		wc := workerConfig{ID: i, System: s.name, Endpoints: cfg.Endpoints, Key: key, Hold: cfg.Hold}
		if s.inProcess {
			ws = append(ws, startGoroutine(ctx, wc))
			continue
		}
		w, err := startProcess(ctx, wc)
		if err != nil {
			r.Error = "start worker: " + err.Error()
			return r
		}
		ws = append(ws, w)
	}
	for _, w := range ws {
		select {
		case err := <-w.ready:
			if err != nil {
				r.Error = err.Error()
				return r
			}
		case <-time.After(2 * time.Minute):
			r.Error = "a worker was not ready within 2m"
			return r
		}
	}
	cnt := newCounter(s.store, cfg.Endpoints)
	if cnt != nil {
		defer cnt.close()
	}
	var results []workerResult
	from := time.Now().Add(50 * time.Millisecond)
	until := from.Add(cfg.Duration)
	var total int64
	countWindow(ctx, cnt, &r, func() {
		startErrs := make([]error, len(ws))
		for i, w := range ws {
			startErrs[i] = w.start(from, until)
		}
		for i, w := range ws {
			wr := <-w.result
			// A worker that failed before its window (its open or
			// warm-up) has exited, so its start line found the pipe
			// closed: the reason is in its result, not in the write.
			if startErrs[i] != nil && wr.Error == "" {
				wr.Error = "start: " + startErrs[i].Error()
			}
			results = append(results, wr)
		}
		for _, wr := range results {
			total += int64(len(wr.Acquisitions))
		}
		r.Acquisitions = total // for countWindow: every acquisition, late ones too
	})
	fillContended(&r, results, from, until)
	return r
}

// fillContended computes the contended figures from the workers'
// acquisitions: throughput within the window, wait and handoff, fairness,
// round trips, and the overlap check over every acquisition.
func fillContended(r *Result, results []workerResult, from, until time.Time) {
	var all []acquisition
	var rt, cpu int64
	rtKnown, cpuKnown := true, len(results) > 0
	perWorker := make([]int64, len(results))
	for i, wr := range results {
		if wr.Error != "" && r.Error == "" {
			r.Error = fmt.Sprintf("worker %d: %s", wr.ID, wr.Error)
		}
		if wr.CPU < 0 {
			cpuKnown = false
		}
		cpu += wr.CPU
		r.WarmRetries += wr.WarmRetries
		if wr.WarmErr != "" && r.WarmErr == "" {
			r.WarmErr = fmt.Sprintf("worker %d: %s", wr.ID, wr.WarmErr)
		}
		all = append(all, wr.Acquisitions...)
		for _, a := range wr.Acquisitions {
			if a.Got <= until.UnixNano() {
				perWorker[i]++
			}
		}
		if wr.RoundTrips < 0 {
			rtKnown = false
		}
		rt += wr.RoundTrips
	}
	total := int64(len(all))
	if rtKnown && total > 0 {
		v := float64(rt) / float64(total)
		r.RTPerAcq = &v
	}
	if cpuKnown && total > 0 {
		v := float64(cpu) / 1e3 / float64(total)
		r.ClientCPU = &v
	}
	r.Overlaps = overlaps(all)
	sort.Slice(all, func(i, j int) bool { return all[i].Got < all[j].Got })
	var inWindow int64
	var waits, handoffs []time.Duration
	for i, a := range all {
		if a.Got <= until.UnixNano() {
			inWindow++
		}
		if a.Call <= until.UnixNano() {
			waits = append(waits, time.Duration(a.Got-a.Call))
		}
		if i > 0 && a.Call < all[i-1].Release {
			handoffs = append(handoffs, time.Duration(a.Got-all[i-1].Release))
		}
	}
	r.Seconds = until.Sub(from).Seconds()
	r.AcqPerSec = float64(inWindow) / r.Seconds
	r.WaitP50, r.WaitP99 = pct(waits, 50), pct(waits, 99)
	if len(handoffs) > 0 {
		v := pct(handoffs, 99)
		r.HandoffP99 = &v
	}
	if len(perWorker) > 0 {
		r.FairMax, r.FairMin = slices.Max(perWorker), slices.Min(perWorker)
	}
}

// overlaps counts the acquisitions that began while an earlier one was
// still held: each acquisition is known held from Got to Release, so a
// correct lock never has one Got before the Release of the one before.
func overlaps(all []acquisition) int {
	s := slices.Clone(all)
	sort.Slice(s, func(i, j int) bool { return s[i].Got < s[j].Got })
	n := 0
	var maxRelease int64
	for i, a := range s {
		if i > 0 && a.Got < maxRelease {
			n++
		}
		maxRelease = max(maxRelease, a.Release)
	}
	return n
}

// minTTLFallback is the lease many-holds uses on a backend that refuses
// a shorter one (the ZooKeeper and Consul minimum).
const minTTLFallback = 10 * time.Second

// runManyHolds holds cfg.Holds keys through one Locker and measures the
// goroutines and heap per hold, the holds lost while held and the renewal
// round trips (Redis).
func runManyHolds(ctx context.Context, cfg Config, s system, ttl time.Duration) Result {
	r := Result{Scenario: ScenManyHolds, System: s.name, Holds: cfg.Holds, Reps: 1, TTL: "default"}
	if ttl > 0 {
		r.TTL = ttl.String()
	}
	c, err := s.open(ctx, cfg.Endpoints, ttl)
	if err != nil {
		r.Error = "open: " + err.Error()
		return r
	}
	defer func() { _ = c.close() }()
	h, ok := c.(holder)
	if !ok {
		r.Error = "not a dlock system"
		return r
	}
	prefix := fmt.Sprintf("holds-%d-", time.Now().UnixNano())
	err = lockUnlock(ctx, c, prefix+"warm")
	if errors.Is(err, dlock.ErrInvalidOption) && ttl > 0 && ttl < minTTLFallback {
		// ZooKeeper and Consul refuse a lease this short: measure at
		// their minimum instead, and say so.
		c.close()
		if c, err = s.open(ctx, cfg.Endpoints, minTTLFallback); err != nil {
			r.Error = "open: " + err.Error()
			return r
		}
		h = c.(holder)
		r.TTL = fmt.Sprintf("%v (%v refused: below the backend's minimum)", minTTLFallback, ttl)
		err = lockUnlock(ctx, c, prefix+"warm")
	}
	if err != nil {
		r.Error = "warm-up: " + err.Error()
		return r
	}
	g0, heap0 := usage()
	ms := make([]*dlock.Mutex, cfg.Holds)
	var next atomic.Int64
	var firstErr atomic.Value
	actx, cancel := context.WithTimeout(ctx, cfg.AcquireBudget)
	start := time.Now()
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Holds || actx.Err() != nil {
					return
				}
				m, err := h.hold(actx, prefix+strconv.Itoa(i))
				if err != nil {
					if actx.Err() == nil {
						firstErr.CompareAndSwap(nil, err)
					}
					return
				}
				ms[i] = m
			}
		}()
	}
	wg.Wait()
	cancel()
	r.AcquireSeconds = time.Since(start).Seconds()
	var held []*dlock.Mutex
	for _, m := range ms {
		if m != nil {
			held = append(held, m)
		}
	}
	r.Held = len(held)
	if e, _ := firstErr.Load().(error); e != nil {
		r.Error = "lock: " + e.Error()
	}
	r.LostAcquiring, _ = lostOf(held)
	rt0 := c.roundTrips()
	var srv0, srv1 uint64
	cnt := newCounter(s.store, cfg.Endpoints)
	if cnt != nil {
		defer cnt.close()
		_, _, srv0, _ = cnt.sample(ctx)
	}
	cpu0 := processCPU()
	t0 := time.Now()
	time.Sleep(cfg.HoldFor)
	held1 := time.Since(t0)
	client := (processCPU() - cpu0).Seconds() / held1.Seconds()
	r.HeldClientCores = &client
	if cnt != nil {
		if _, _, srv1, err = cnt.sample(ctx); err == nil && srv0 > 0 && srv1 > srv0 {
			v := float64(srv1-srv0) / 1e6 / held1.Seconds()
			r.HeldServerCores = &v
		}
	}
	g1, heap1 := usage()
	if cfg.HeapProfile != "" {
		if err := writeHeapProfile(cfg.HeapProfile, s.name, r.TTL); err != nil {
			cfg.logf("heap profile: %v", err)
		}
	}
	if rt0 >= 0 && len(held) > 0 {
		v := float64(c.roundTrips()-rt0) / float64(len(held)) / held1.Seconds()
		r.RenewRTPerHoldSec = &v
	}
	var first error
	if r.Lost, first = lostOf(held); first != nil && r.Error == "" {
		r.Error = fmt.Sprintf("first loss: %v", first)
	}
	if len(held) > 0 {
		r.GoroutinesPerHold = float64(g1-g0) / float64(len(held))
		r.HeapPerHold = float64(int64(heap1)-int64(heap0)) / float64(len(held))
	}
	// Release them, in parallel, bounded.
	var rel atomic.Int64
	var relMu sync.Mutex
	var relErr error
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer rcancel()
	start = time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(rel.Add(1) - 1)
				if i >= len(held) {
					return
				}
				// Lost ones are already counted.
				if err := held[i].Unlock(rctx); err != nil && !errors.Is(err, dlock.ErrLockLost) {
					relMu.Lock()
					r.ReleaseErrors++
					if relErr == nil {
						relErr = err
					}
					relMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	r.ReleaseSeconds = time.Since(start).Seconds()
	if relErr != nil && r.Error == "" {
		r.Error = fmt.Sprintf("%d Unlocks failed, the first: %v", r.ReleaseErrors, relErr)
	}
	return r
}

// lostOf counts the holds whose Done has closed, and gives the first
// one's error.
func lostOf(held []*dlock.Mutex) (n int, first error) {
	for _, m := range held {
		select {
		case <-m.Done():
			if n++; n == 1 {
				first = m.Err()
			}
		default:
		}
	}
	return n, first
}

// writeHeapProfile writes the heap profile to base, the system and ttl
// added to its name ("holds.pprof" becomes "holds-dlock-redis-3s.pprof").
func writeHeapProfile(base, system, ttl string) error {
	tag := strings.Join(strings.FieldsFunc(strings.ToLower(system+" "+strings.Fields(ttl)[0]),
		func(r rune) bool { return (r < 'a' || r > 'z') && (r < '0' || r > '9') }), "-")
	ext := filepath.Ext(base)
	f, err := os.Create(strings.TrimSuffix(base, ext) + "-" + tag + ext)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// usage is the goroutines and the live heap: what a forced collection
// found reachable (/gc/heap/live:bytes). HeapAlloc after the same
// collection also counts what was allocated while it ran, live or not:
// with 100,000 holds renewed every second, the renewals' garbage of that
// second, about a kilobyte per hold, which the holds do not keep.
func usage() (goroutines int, heap uint64) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		panic("benchpeers: this Go runtime has no " + s[0].Name)
	}
	return runtime.NumGoroutine(), s[0].Value.Uint64()
}

// pct is the p-th percentile of ds, in milliseconds.
func pct(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	i = min(max(i-1, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}
