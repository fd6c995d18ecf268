package benchpeers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// aggregate folds the repetitions of each (scenario, system, lockers)
// into one Result of medians; overlaps are summed and errors kept.
func aggregate(raw []Result) []Result {
	type key struct {
		scen, sys, peer string
		lockers         int
	}
	var order []key
	groups := map[key][]Result{}
	for _, r := range raw {
		k := key{r.Scenario, r.System, r.Peer, r.Lockers}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	var out []Result
	for _, k := range order {
		rs := groups[k]
		m := rs[0]
		m.Reps = len(rs)
		f := func(get func(Result) float64) float64 {
			var v []float64
			for _, r := range rs {
				v = append(v, get(r))
			}
			return median(v)
		}
		fp := func(get func(Result) *float64) *float64 {
			var v []float64
			for _, r := range rs {
				if p := get(r); p != nil {
					v = append(v, *p)
				}
			}
			if len(v) == 0 {
				return nil
			}
			x := median(v)
			return &x
		}
		m.Acquisitions = int64(f(func(r Result) float64 { return float64(r.Acquisitions) }))
		m.Seconds = f(func(r Result) float64 { return r.Seconds })
		m.AcqPerSec = f(func(r Result) float64 { return r.AcqPerSec })
		m.WaitP50 = f(func(r Result) float64 { return r.WaitP50 })
		m.WaitP99 = f(func(r Result) float64 { return r.WaitP99 })
		m.FairMax = int64(f(func(r Result) float64 { return float64(r.FairMax) }))
		m.FairMin = int64(f(func(r Result) float64 { return float64(r.FairMin) }))
		m.HandoffP99 = fp(func(r Result) *float64 { return r.HandoffP99 })
		m.CmdsPerAcq = fp(func(r Result) *float64 { return r.CmdsPerAcq })
		m.UsecPerAcq = fp(func(r Result) *float64 { return r.UsecPerAcq })
		m.CPUPerAcq = fp(func(r Result) *float64 { return r.CPUPerAcq })
		m.RTPerAcq = fp(func(r Result) *float64 { return r.RTPerAcq })
		m.ClientCPU = fp(func(r Result) *float64 { return r.ClientCPU })
		m.Allocs = fp(func(r Result) *float64 { return r.Allocs })
		m.AllocBytes = fp(func(r Result) *float64 { return r.AllocBytes })
		m.PeerAcqPerSec = f(func(r Result) float64 { return r.PeerAcqPerSec })
		m.BlockRatios = nil
		for _, r := range rs {
			m.BlockRatios = append(m.BlockRatios, r.BlockRatios...)
		}
		m.Overlaps, m.Error, m.WarmRetries, m.WarmErr = 0, "", 0, ""
		for _, r := range rs {
			m.Overlaps += r.Overlaps
			m.WarmRetries += r.WarmRetries
			if r.WarmErr != "" && m.WarmErr == "" {
				m.WarmErr = r.WarmErr
			}
			if r.Error != "" && m.Error == "" {
				m.Error = r.Error
			}
		}
		out = append(out, m)
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Overlapped reports whether any contended run saw two holders at once.
func Overlapped(rs []Result) bool {
	return slices.ContainsFunc(rs, func(r Result) bool { return r.Overlaps > 0 })
}

// Meta describes the run for the report's header.
type Meta struct {
	Command  string            `json:"command"`
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Machine  map[string]string `json:"machine"`
	Servers  map[string]string `json:"servers"`
	Note     string            `json:"note,omitempty"`
	Config   Config            `json:"config"` // what -render needs to write the report again
}

// Machine describes this host: CPUs, memory, CPU model, Go, kernel.
func Machine() map[string]string {
	m := map[string]string{
		"nproc": fmt.Sprint(runtime.NumCPU()),
		"go":    runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				m["memory"] = strings.TrimSpace(v)
			}
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m["kernel"] = strings.TrimSpace(string(out))
	}
	return m
}

// ServerVersions asks each server of the endpoints for its version.
func ServerVersions(ctx context.Context, ep Endpoints) map[string]string {
	v := map[string]string{}
	redisVersion := func(u string) string {
		hs, err := hosts(u, "6379")
		if err != nil {
			return err.Error()
		}
		c := goredis.NewClient(&goredis.Options{Addr: hs[0]})
		defer c.Close()
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err.Error()
		}
		for _, l := range strings.Split(info, "\n") {
			if x, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
				return "Redis " + x
			}
		}
		return "?"
	}
	if ep.Redis != "" {
		v["redis"] = redisVersion(ep.Redis)
	}
	if ep.Redlock != "" {
		v["redlock"] = redisVersion(ep.Redlock) + " x5 masters"
	}
	httpGet := func(url string) ([]byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	if ep.Etcd != "" {
		hs, _ := hosts(ep.Etcd, "2379")
		if len(hs) > 0 {
			var e struct {
				Server string `json:"etcdserver"`
			}
			b, err := httpGet("http://" + hs[0] + "/version")
			if err == nil {
				err = json.Unmarshal(b, &e)
			}
			v["etcd"] = "etcd " + e.Server
			if err != nil {
				v["etcd"] = err.Error()
			}
		}
	}
	if ep.Consul != "" {
		hs, _ := hosts(ep.Consul, "8500")
		if len(hs) > 0 {
			var a struct {
				Config struct{ Version string }
			}
			b, err := httpGet("http://" + hs[0] + "/v1/agent/self")
			if err == nil {
				err = json.Unmarshal(b, &a)
			}
			v["consul"] = "Consul " + a.Config.Version
			if err != nil {
				v["consul"] = err.Error()
			}
		}
	}
	if ep.ZK != "" {
		hs, _ := hosts(ep.ZK, "2181")
		if len(hs) > 0 {
			v["zookeeper"] = zkVersion(hs[0])
		}
	}
	return v
}

func zkVersion(h string) string {
	conn, err := net.DialTimeout("tcp", h, 2*time.Second)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	_, _ = io.WriteString(conn, "mntr")
	b, _ := io.ReadAll(conn)
	for _, l := range strings.Split(string(b), "\n") {
		if x, ok := strings.CutPrefix(l, "zk_version"); ok {
			x = strings.TrimSpace(x)
			x, _, _ = strings.Cut(x, ",")
			return "ZooKeeper " + x
		}
	}
	return "?"
}

func fnum(p *float64, prec int) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", prec, *p)
}

// find returns the result of a scenario, system and lockers count.
func find(rs []Result, scen, sys string, lockers int, ttl string) *Result {
	for i := range rs {
		r := &rs[i]
		if r.Scenario == scen && r.System == sys && r.Lockers == lockers && (ttl == "" || r.TTL == ttl) {
			return r
		}
	}
	return nil
}

// WriteMarkdown writes BENCHMARKS.md: the header, a table per scenario,
// the ratios dlock/peer and the goals of issue 45 with their status.
func WriteMarkdown(w io.Writer, meta Meta, rs []Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	cfg := meta.Config
	p("# Benchmarks: dlock beside its peers\n\n")
	p("Generated by `%s` (tools/internal/benchpeers) on %s, in %s.\n", meta.Command,
		meta.Started.UTC().Format("2006-01-02 15:04 MST"), meta.Finished.Sub(meta.Started).Round(time.Second))
	p("Every system runs on the same real servers over loopback, one after the other, repetitions interleaved\n")
	p("(repetition r of every system before repetition r+1 of any); timed figures are medians of %d.\n\n", cfg.Reps)
	if meta.Note != "" {
		p("**%s**\n\n", meta.Note)
	}
	p("| machine | |\n|---|---|\n")
	for _, k := range []string{"nproc", "memory", "cpu", "kernel", "go"} {
		p("| %s | %s |\n", k, meta.Machine[k])
	}
	for _, k := range []string{"redis", "redlock", "etcd", "zookeeper", "consul"} {
		if v, ok := meta.Servers[k]; ok {
			p("| %s server | %s |\n", k, v)
		}
	}
	p("\n")
	p("Columns: acq/s = acquisitions per second; wait = from Lock called to Lock returned; handoff = from the holder\n")
	p("beginning Unlock to the next waiter's Lock returning; fairness = most/fewest acquisitions of one worker;\n")
	p("srv req/acq = server-side requests per acquisition (Redis: INFO commandstats calls, Lua's inner commands\n")
	p("included; etcd: gRPC messages received; ZooKeeper: packets received; Consul and memory: n/a); srv µs/acq =\n")
	p("Redis commandstats usec per acquisition (time inside commands: a script's usec includes its inner commands',\n")
	p("which are counted again, and a server preempted on a busy machine counts the wait); srv CPU µs/acq = CPU time\n")
	p("of the Redis main threads per acquisition (INFO cpu, used_cpu_sys/user_main_thread: commands, networking and\n")
	p("pub/sub delivery, no double count; contended only); client CPU µs/acq = CPU time (user and system) of all the\n")
	p("worker processes in their timed window per acquisition (getrusage; contended: n/a for mem://, whose\n")
	p("workers share one process; uncontended and parallel-keys: the one process running the loop, clients and\n")
	p("library included); allocs/acq and B/acq = heap allocations of that process per Lock+Unlock\n")
	p("(runtime.MemStats Mallocs and TotalAlloc over the window); RT/acq = client round trips per acquisition, counted by a\n")
	p("go-redis hook on the clients (a pipeline is one); overlaps = acquisitions that began before the previous holder\n")
	p("began its Unlock (must be 0).\n\n")

	if cfg.wants(ScenUncontended) || cfg.wants(ScenParallel) {
		for _, scen := range []string{ScenUncontended, ScenParallel} {
			if !cfg.wants(scen) {
				continue
			}
			what := "one goroutine, one key, Lock+Unlock in a loop"
			if scen == ScenParallel {
				what = fmt.Sprintf("%d goroutines on one client, a key each", cfg.Parallel)
			}
			p("## %s (%s; %v per run)\n\n", scen, what, cfg.Duration)
			p("| system | acq/s | wait p50 ms | wait p99 ms | srv req/acq | srv µs/acq | RT/acq | client CPU µs/acq | allocs/acq | B/acq | error |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
			for _, r := range rs {
				if r.Scenario != scen {
					continue
				}
				p("| %s | %.0f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n", r.System, r.AcqPerSec, r.WaitP50, r.WaitP99,
					fnum(r.CmdsPerAcq, 1), fnum(r.UsecPerAcq, 1), fnum(r.RTPerAcq, 2), fnum(r.ClientCPU, 1), fnum(r.Allocs, 1),
					fnum(r.AllocBytes, 0), r.Error)
			}
			p("\n")
		}
	}
	writePaired(w, cfg, rs)
	if cfg.wants(ScenContended) {
		for _, n := range cfg.Lockers {
			p("## contended across processes: %d workers, one key, %v hold (%v per run)\n\n", n, cfg.Hold, cfg.Duration)
			p("Each worker is its own OS process with its own client (mem://: its own goroutine and Locker, the store being per process).\n\n")
			p("| system | acq/s | wait p99 ms | handoff p99 ms | fairness max/min | srv req/acq | srv µs/acq | srv CPU µs/acq | client CPU µs/acq | RT/acq | overlaps | error |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
			for _, r := range rs {
				if r.Scenario != ScenContended || r.Lockers != n {
					continue
				}
				p("| %s | %.0f | %.1f | %s | %d/%d | %s | %s | %s | %s | %s | %d | %s |\n", r.System, r.AcqPerSec, r.WaitP99,
					fnum(r.HandoffP99, 2), r.FairMax, r.FairMin, fnum(r.CmdsPerAcq, 1), fnum(r.UsecPerAcq, 1),
					fnum(r.CPUPerAcq, 1), fnum(r.ClientCPU, 0), fnum(r.RTPerAcq, 2), r.Overlaps, r.Error)
			}
			p("\n")
			for _, r := range rs {
				if r.Scenario == ScenContended && r.Lockers == n && r.WarmRetries > 0 {
					p("%s: a worker's warm-up (before the timed window) failed and was tried again %d time(s) over the repetitions (first error: %s).\n\n",
						r.System, r.WarmRetries, r.WarmErr)
				}
			}
		}
	}
	if cfg.wants(ScenManyHolds) {
		p("## many holds: %d keys held through one Locker, kept %v once held (one run each)\n\n", cfg.Holds, cfg.HoldFor)
		p("Acquired by 32 goroutines within %v; goroutines and live heap measured while all are held, less\n", cfg.AcquireBudget)
		p("before; lost = holds whose Done closed while held; renew RT = client round trips per hold per second while held (Redis);\n")
		p("release s = Unlock of all that were held, 32 at a time; lost acq = of the lost, those lost before the last was acquired;\n")
		p("cores = CPU seconds a second while all were held, of this process (client) and of the Redis servers' main threads (servers).\n")
		p("Each system runs at every TTL before the next, Consul's runs next to last and ZooKeeper's last: both stores go on\n")
		p("cleaning up for minutes after a run has released its holds, and no other run should share the cores with that.\n")
		p("The live heap is what a forced collection found reachable (runtime/metrics /gc/heap/live:bytes); HeapAlloc after\n")
		p("it would also count the renewals' garbage allocated while it ran, which no hold keeps.\n\n")
		p("| system | TTL | held | acquire s | release s | goroutines/hold | heap B/hold | lost | lost acq | renew RT/hold/s | client cores | server cores | error |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, r := range rs {
			if r.Scenario != ScenManyHolds {
				continue
			}
			p("| %s | %s | %d/%d | %.1f | %.1f | %.3f | %.0f | %d | %d | %s | %s | %s | %s |\n", r.System, r.TTL, r.Held, r.Holds,
				r.AcquireSeconds, r.ReleaseSeconds, r.GoroutinesPerHold, r.HeapPerHold, r.Lost, r.LostAcquiring,
				fnum(r.RenewRTPerHoldSec, 3), fnum(r.HeldClientCores, 2), fnum(r.HeldServerCores, 2), r.Error)
		}
		p("\n")
	}
	writeRatios(w, cfg, rs)
	writeGoals(w, meta, rs)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func pratio(a, b *float64) string {
	if a == nil || b == nil {
		return "n/a"
	}
	return ratio(*a, *b)
}

func writeRatios(w io.Writer, cfg Config, rs []Result) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## ratios dlock / peer\n\n")
	p("| scenario | system | peer | acq/s | wait p99 | srv req/acq | RT/acq |\n|---|---|---|--:|--:|--:|--:|\n")
	type sc struct {
		scen    string
		lockers int
	}
	var scs []sc
	for _, s := range []string{ScenUncontended, ScenParallel} {
		if cfg.wants(s) {
			scs = append(scs, sc{s, 0})
		}
	}
	if cfg.wants(ScenContended) {
		for _, n := range cfg.Lockers {
			scs = append(scs, sc{ScenContended, n})
		}
	}
	for _, s := range scs {
		label := s.scen
		if s.lockers > 0 {
			label = fmt.Sprintf("contended x%d", s.lockers)
		}
		for _, d := range systems {
			for _, peer := range peerOf[d.name] {
				a, b := find(rs, s.scen, d.name, s.lockers, ""), find(rs, s.scen, peer, s.lockers, "")
				if a == nil || b == nil {
					continue
				}
				p("| %s | %s | %s | %s | %s | %s | %s |\n", label, d.name, peer, ratio(a.AcqPerSec, b.AcqPerSec),
					ratio(a.WaitP99, b.WaitP99), pratio(a.CmdsPerAcq, b.CmdsPerAcq), pratio(a.RTPerAcq, b.RTPerAcq))
			}
		}
	}
	p("\n")
}
