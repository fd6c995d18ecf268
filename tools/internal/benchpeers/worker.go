package benchpeers

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// WorkerEnv, when set in a process's environment, makes it a contended
// worker (RunWorkerIfAsked): it holds the JSON of a workerConfig.
const WorkerEnv = "DLOCK_BENCHPEERS_WORKER"

// WorkerProfileEnv, when set in a contended worker's environment, names a
// directory where the worker writes the CPU profile of its timed window,
// a file per worker and run, named after the system and the worker (benchpeers
// -worker-cpuprofile sets it): the workers are the processes that run the
// library under test, which the command's own -cpuprofile does not see.
const WorkerProfileEnv = "DLOCK_BENCHPEERS_WORKER_CPUPROFILE"

// profileWindow starts the CPU profile WorkerProfileEnv asks for, if any,
// and returns what stops it; a profile that cannot be written is skipped.
func profileWindow(wc workerConfig) (stop func()) {
	dir := os.Getenv(WorkerProfileEnv)
	if dir == "" {
		return func() {}
	}
	name := strings.NewReplacer(" ", "_", "/", "_", ":", "_", "(", "", ")", "").Replace(wc.System)
	f, err := os.CreateTemp(dir, fmt.Sprintf("%s-w%d-*.pprof", name, wc.ID))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// workerConfig is what one contended worker is told.
type workerConfig struct {
	ID        int           `json:"id"`
	System    string        `json:"system"`
	Endpoints Endpoints     `json:"endpoints"`
	Key       string        `json:"key"`
	Hold      time.Duration `json:"hold"`
}

// acquisition is one hold of the contended key, in UnixNano of the
// host's clock (the same clock in every process of the host).
type acquisition struct {
	Call    int64 `json:"call"`    // Lock called
	Got     int64 `json:"got"`     // Lock returned: held from here
	Release int64 `json:"release"` // Unlock about to be called: still held here
}

// workerResult is what a worker reports at the end.
type workerResult struct {
	ID           int           `json:"id"`
	Acquisitions []acquisition `json:"acquisitions"`
	RoundTrips   int64         `json:"round_trips"` // -1: not counted
	CPU          int64         `json:"cpu_ns"`      // the process's CPU time (user and system) in its window; -1: not measured
	WarmRetries  int           `json:"warm_retries,omitempty"`
	WarmErr      string        `json:"warm_error,omitempty"` // the first failed warm-up, when retried
	Error        string        `json:"error,omitempty"`
}

// runWorker opens its own client of the system, calls ready once it is
// connected and warmed up, waits for the window from start, and locks,
// holds and unlocks the key until the window ends. cpu, when not nil,
// reads the CPU time the worker's process has used so far.
func runWorker(ctx context.Context, wc workerConfig, ready func(), start func() (time.Time, time.Time, error), cpu func() time.Duration) workerResult {
	res := workerResult{ID: wc.ID, RoundTrips: -1, CPU: -1}
	sys, ok := systemByName(wc.System)
	if !ok {
		res.Error = "unknown system " + wc.System
		ready()
		return res
	}
	c, err := sys.open(ctx, wc.Endpoints, 0)
	if err != nil {
		res.Error = "open: " + err.Error()
		ready()
		return res
	}
	defer c.close()
	// Warm up on a key of its own: connections, scripts, sessions.
	retries, first, err := warmUp(ctx, c, wc.Key+"-warm-"+strconv.Itoa(wc.ID))
	res.WarmRetries = retries
	if first != nil {
		res.WarmErr = first.Error()
	}
	if err != nil {
		res.Error = "warm-up: " + err.Error()
		ready()
		return res
	}
	ready()
	from, until, err := start()
	if err != nil {
		res.Error = err.Error()
		return res
	}
	time.Sleep(time.Until(from))
	defer profileWindow(wc)()
	rt0 := c.roundTrips()
	var cpu0 time.Duration
	if cpu != nil {
		cpu0 = cpu()
	}
	for time.Now().Before(until) {
		a := acquisition{Call: time.Now().UnixNano()}
		lctx, cancel := context.WithTimeout(ctx, time.Minute) // bounds a hang
		unlock, err := c.lock(lctx, wc.Key)
		cancel()
		if err != nil {
			res.Error = "lock: " + err.Error()
			break
		}
		a.Got = time.Now().UnixNano()
		time.Sleep(wc.Hold)
		a.Release = time.Now().UnixNano()
		res.Acquisitions = append(res.Acquisitions, a)
		uctx, cancel := context.WithTimeout(ctx, time.Minute)
		err = unlock(uctx)
		cancel()
		if err != nil {
			res.Error = "unlock: " + err.Error()
			break
		}
	}
	if cpu != nil {
		res.CPU = int64(cpu() - cpu0)
	}
	if rt0 >= 0 {
		res.RoundTrips = c.roundTrips() - rt0
	}
	return res
}

// warmRetries is how many times a worker's warm-up is tried again after
// it failed. The workers of a run start together, and up to 32 processes
// opening clients at once on a small machine can starve one past a
// backend's request timeout (Redlock's is 100 ms per instance): that is a
// cold start, not what the run measures. A retried warm-up is reported
// (Result.WarmRetries) with its first error; one that fails every time
// is the worker's error.
const warmRetries = 3

// warmUp locks and unlocks key, tried again after a failure up to
// warmRetries times, 200 ms apart. It returns the retries made, the first
// failure (nil when none) and the last error (nil once one succeeded).
func warmUp(ctx context.Context, c client, key string) (retries int, first, err error) {
	for {
		if err = lockUnlock(ctx, c, key); err == nil || retries == warmRetries || ctx.Err() != nil {
			return retries, first, err
		}
		if first == nil {
			first = err
		}
		retries++
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func lockUnlock(ctx context.Context, c client, key string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	unlock, err := c.lock(ctx, key)
	if err != nil {
		return err
	}
	return unlock(ctx)
}

// RunWorkerIfAsked makes this process a contended worker when WorkerEnv
// is set: it runs the worker over stdin (the start line) and stdout
// ("ready", then the JSON result) and returns true; the caller exits.
// The benchpeers command and the harness's tests call it first thing.
func RunWorkerIfAsked() bool {
	raw := os.Getenv(WorkerEnv)
	if raw == "" {
		return false
	}
	var wc workerConfig
	out := json.NewEncoder(os.Stdout)
	if err := json.Unmarshal([]byte(raw), &wc); err != nil {
		fmt.Println("ready")
		_ = out.Encode(workerResult{Error: "bad " + WorkerEnv + ": " + err.Error()})
		return true
	}
	in := bufio.NewReader(os.Stdin)
	res := runWorker(context.Background(), wc, func() { fmt.Println("ready") }, func() (time.Time, time.Time, error) {
		return readWindow(in)
	}, processCPU)
	_ = out.Encode(res)
	return true
}

// processCPU is the CPU time, user and system, this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func readWindow(r *bufio.Reader) (time.Time, time.Time, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("reading the start line: %w", err)
	}
	f := strings.Fields(line)
	if len(f) != 2 {
		return time.Time{}, time.Time{}, fmt.Errorf("start line %q", line)
	}
	a, err1 := strconv.ParseInt(f[0], 10, 64)
	b, err2 := strconv.ParseInt(f[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return time.Unix(0, a), time.Unix(0, b), nil
}

// worker is a started worker, in its own process or (mem://) a goroutine.
type worker struct {
	ready  chan error
	start  func(from, until time.Time) error
	result chan workerResult
	kill   func()
}

// startProcess starts a worker as a new process of this executable.
func startProcess(ctx context.Context, wc workerConfig) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(wc)
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &worker{ready: make(chan error, 1), result: make(chan workerResult, 1)}
	w.kill = func() { _ = cmd.Process.Kill() }
	w.start = func(from, until time.Time) error {
		_, err := fmt.Fprintf(stdin, "%d %d\n", from.UnixNano(), until.UnixNano())
		return err
	}
	go func() {
		br := bufio.NewReader(stdout)
		line, err := br.ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("worker %d said %q before ready", wc.ID, line)
		}
		w.ready <- err
		var res workerResult
		if err == nil {
			err = json.NewDecoder(br).Decode(&res)
		}
		_, _ = io.Copy(io.Discard, br)
		werr := cmd.Wait()
		if err != nil {
			res = workerResult{ID: wc.ID, Error: fmt.Sprintf("worker process: %v (exit: %v)", err, werr)}
		}
		w.result <- res
	}()
	return w, nil
}

// startGoroutine runs a worker in this process (mem://, whose store is
// per process), with its own client all the same.
func startGoroutine(ctx context.Context, wc workerConfig) *worker {
	w := &worker{ready: make(chan error, 1), result: make(chan workerResult, 1), kill: func() {}}
	window := make(chan [2]time.Time, 1)
	w.start = func(from, until time.Time) error { window <- [2]time.Time{from, until}; return nil }
	go func() {
		w.result <- runWorker(ctx, wc, func() { w.ready <- nil }, func() (time.Time, time.Time, error) {
			select {
			case win := <-window:
				return win[0], win[1], nil
			case <-ctx.Done():
				return time.Time{}, time.Time{}, ctx.Err()
			}
		}, nil) // the process is shared: its CPU is not the worker's
	}()
	return w
}
