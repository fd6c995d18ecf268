package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Backend is one lock topology under test.
type Backend struct {
	Name     string        // topology name, e.g. "etcd3"
	URL      string        // backend URL, without ttl
	TTL      time.Duration // the workers' lease
	Grace    time.Duration // how much later than TTL the server may expire a lease
	Liveness time.Duration // bound on reacquisition after a heal, beyond TTL+Grace
}

// Run is one scenario execution: a resource, and worker processes.
type Run struct {
	t       testing.TB
	B       Backend
	Res     *Resource
	Key     string
	workers []*worker
	logDir  string

	mu     sync.Mutex
	healed []int64
}

type worker struct {
	log    string // the worker's stdout and stderr
	cfg    WorkerConfig
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// RunOptions shape a run.
type RunOptions struct {
	Workers int
	Fenced  bool
	// Hold, when set, gives worker i a fixed sleep between read and write
	// (the victim of a pause needs one long enough to be caught holding).
	Hold func(i int) time.Duration
	// URL, when set, gives worker i its own backend URL (through a proxy).
	URL func(i int) string
	// SelfStop, when set, makes worker 0 stop itself after its first read
	// (see WorkerConfig.SelfStop); wait for it with WaitStopped.
	SelfStop bool
	// Permits, when above 0, makes every worker hold a permit of a
	// semaphore of that many instead of the lock (WorkerConfig.Permits).
	Permits int
	// Elect makes the workers candidates in an election instead of
	// holders of a lock (see WorkerConfig.Elect).
	Elect bool
	// Readers, when above 0, makes every worker hold a read-write lock of
	// that many readers instead of the lock; ReaderWorkers says which
	// workers are readers (the others are writers).
	Readers       int
	ReaderWorkers func(i int) bool
	// Holds, when above 0, makes worker 0 hold that many keys on one
	// Locker and worker 1 (if any) the taker of a sample of them (see
	// WorkerConfig.Holds).
	Holds int
	// HoldsSpread spreads the TTLs of a many-holds run's holds from the
	// backend's TTL to that plus HoldsSpread (holdTTL).
	HoldsSpread time.Duration
}

// Start starts the resource and the workers.
func Start(t testing.TB, b Backend, o RunOptions) *Run {
	t.Helper()
	res, err := StartResource(o.Fenced)
	if err != nil {
		t.Fatalf("resource: %v", err)
	}
	t.Cleanup(func() { _ = res.Close() })
	var id [4]byte
	_, _ = rand.Read(id[:])
	r := &Run{t: t, B: b, Res: res, Key: "dlock-faults/" + hex.EncodeToString(id[:])}
	r.logDir = t.TempDir()
	for i := 0; i < o.Workers; i++ {
		cfg := WorkerConfig{ID: i, URL: b.URL, Key: r.Key, TTL: b.TTL, Resource: res.Addr()}
		if o.URL != nil {
			cfg.URL = o.URL(i)
		}
		if o.Hold != nil {
			cfg.Hold = o.Hold(i)
		}
		cfg.SelfStop = o.SelfStop && i == 0
		cfg.Permits = o.Permits
		cfg.Elect = o.Elect
		cfg.Readers = o.Readers
		cfg.Reader = o.Readers > 0 && o.ReaderWorkers != nil && o.ReaderWorkers(i)
		cfg.Holds, cfg.Taker, cfg.Spread = o.Holds, o.Holds > 0 && i > 0, o.HoldsSpread
		r.workers = append(r.workers, r.startWorker(cfg))
	}
	t.Cleanup(func() {
		r.stopAll()
		if t.Failed() {
			r.dumpLogs()
		}
	})
	r.waitReady()
	return r
}

// startWorker starts a worker process of cfg.
func (r *Run) startWorker(cfg WorkerConfig) *worker {
	r.t.Helper()
	w := &worker{cfg: cfg, done: make(chan struct{}), log: filepath.Join(r.logDir, fmt.Sprintf("worker-%d.log", cfg.ID))}
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(os.Environ(), cfg.env()...)
	logf, err := os.Create(w.log)
	if err != nil {
		r.t.Fatal(err)
	}
	w.cmd.Stdout, w.cmd.Stderr = logf, logf
	if err := w.cmd.Start(); err != nil {
		r.t.Fatalf("worker %d: %v", cfg.ID, err)
	}
	go func() { _ = w.cmd.Wait(); _ = logf.Close(); close(w.done) }()
	return w
}

// Restart ends worker i (SIGTERM, as a rolling restart does; at once if
// it was killed) and starts its replacement with backend URL url, as a
// new worker, whose number it returns once the replacement has opened
// its Locker. A new number keeps the two processes' holds apart in the
// history.
func (r *Run) Restart(i int, url string) int {
	r.t.Helper()
	old := r.workers[i]
	if old.paused {
		_ = old.cmd.Process.Signal(syscall.SIGCONT)
		old.paused = false
	}
	select {
	case <-old.done:
	default:
		_ = old.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-old.done:
		case <-time.After(30 * time.Second):
			r.t.Fatalf("worker %d did not stop within 30s of SIGTERM", i)
		}
	}
	cfg := old.cfg
	cfg.ID, cfg.URL, cfg.SelfStop = len(r.workers), url, false
	r.workers = append(r.workers, r.startWorker(cfg))
	r.WaitFor(readyTimeout, fmt.Sprintf("worker %d (restarted as %d) to open its Locker", i, cfg.ID),
		func(e Event) bool { return e.Kind == EvReady && e.Worker == cfg.ID })
	return cfg.ID
}

// readyTimeout bounds how long a worker may take to start and open its
// Locker (a loaded machine can take seconds to start a test binary).
const readyTimeout = time.Minute

// waitReady returns once every worker has opened its Locker. A scenario
// injects its fault only after that: a worker still starting when a
// server is killed would fail to open and leave the run one holder short,
// which is not the fault under test. A worker that exits first, or does
// not get ready in time, fails the test with its output.
func (r *Run) waitReady() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for i, w := range r.workers {
		wctx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-w.done:
				stop()
			case <-wctx.Done():
			}
		}()
		_, err := r.Res.WaitFor(wctx, func(e Event) bool { return e.Kind == EvReady && e.Worker == i })
		stop()
		if err != nil {
			r.t.Fatalf("worker %d did not open its Locker: %v", i, err)
		}
	}
}

// HistoryDirVar names a directory where a failed run writes its whole
// history, one JSON event per line, sorted by time.
const HistoryDirVar = "DLOCK_FAULTS_HISTORY"

func writeHistory(name string, h History) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, e := range sorted(h.Events) {
		if err := enc.Encode(e); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// dumpLogs shows what the workers printed, to explain a failed run.
func (r *Run) dumpLogs() {
	for i, w := range r.workers {
		b, _ := os.ReadFile(w.log)
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		if len(b) > 0 {
			r.t.Logf("worker %d output:\n%s", i, b)
		}
	}
	h := r.Res.History(nil)
	if dir := os.Getenv(HistoryDirVar); dir != "" {
		name := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(r.t.Name())+"-"+strings.TrimPrefix(r.Key, "dlock-faults/")+".jsonl")
		if err := writeHistory(name, h); err != nil {
			r.t.Logf("writing the history: %v", err)
		} else {
			r.t.Logf("history written to %s", name)
		}
	}
	from := max(0, len(h.Events)-15)
	for _, e := range h.Events[from:] {
		r.t.Logf("event: %+v", e)
	}
}

func (r *Run) signal(i int, sig syscall.Signal) {
	r.t.Helper()
	w := r.workers[i]
	select {
	case <-w.done:
		r.t.Fatalf("worker %d exited early", i)
	default:
	}
	if err := w.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal worker %d: %v", i, err)
	}
}

// Pause stops worker i (SIGSTOP), as a long GC pause would.
func (r *Run) Pause(i int) { r.signal(i, syscall.SIGSTOP); r.workers[i].paused = true }

// WaitStopped waits until worker i has stopped itself (SelfStop).
func (r *Run) WaitStopped(i int) {
	r.t.Helper()
	w := r.workers[i]
	stat := fmt.Sprintf("/proc/%d/stat", w.cmd.Process.Pid)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(stat)
		if err != nil {
			r.t.Fatalf("worker %d: %v", i, err)
		}
		// The state follows the command name in parentheses: "pid (comm) T ...".
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "T" {
			w.paused = true
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.t.Fatalf("worker %d did not stop itself", i)
}

// Resume continues worker i (SIGCONT).
func (r *Run) Resume(i int) { r.signal(i, syscall.SIGCONT); r.workers[i].paused = false }

// Kill ends worker i at once (SIGKILL), as a crash would.
func (r *Run) Kill(i int) {
	r.signal(i, syscall.SIGKILL)
	<-r.workers[i].done
}

// Healed records that a fault ended now; liveness is checked from here.
func (r *Run) Healed() {
	r.mu.Lock()
	r.healed = append(r.healed, Mono())
	r.mu.Unlock()
}

// WaitFor waits for a matching event, failing the test after d.
func (r *Run) WaitFor(d time.Duration, what string, match func(Event) bool) Event {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	e, err := r.Res.WaitFor(ctx, match)
	if err != nil {
		r.t.Fatalf("waiting for %s: %v", what, err)
	}
	return e
}

// Stop ends every worker (resuming paused ones first) and returns the
// history.
func (r *Run) Stop() History {
	r.stopAll()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Res.History(r.healed)
}

func (r *Run) stopAll() {
	for _, w := range r.workers {
		if w.paused {
			_ = w.cmd.Process.Signal(syscall.SIGCONT)
			w.paused = false
		}
		select {
		case <-w.done:
		default:
			_ = w.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, w := range r.workers {
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			_ = w.cmd.Process.Kill()
			<-w.done
		}
	}
}
