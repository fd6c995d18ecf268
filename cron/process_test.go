package dlockcron_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/redis"
	dlockcron "github.com/dlock-go/dlock/cron"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/robfig/cron/v3"
)

// The test in this file runs the test binary again as child processes
// (TestMain dispatches on childEnv): three instances of a program, each
// with a Cron of its own, as in production.

const childEnv = "DLOCK_CRON_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

const (
	period  = time.Second
	body    = 300 * time.Millisecond // the job's run
	minHold = 750 * time.Millisecond // between the 0.5 s skew and the 1 s period
)

// phased fires every period at phase past the period's start: an
// instance whose schedule runs phase behind another's.
type phased struct{ phase time.Duration }

func (s phased) Next(t time.Time) time.Time {
	n := t.Truncate(period).Add(s.phase)
	for !n.After(t) {
		n = n.Add(period)
	}
	return n
}

// child is one instance: a Cron that runs the job every second at its
// phase, wrapped by Once, and appends a line to the shared file for each
// run ("run TICK PID TOKEN") and each skip ("skip TICK PID"), TICK being
// the second the tick belongs to. It prints "ready" once the Cron runs;
// when its standard input closes, it stops the Cron, closes the Locker,
// prints the errors it saw and "closed".
func child() int {
	phase, _ := time.ParseDuration(os.Getenv("PHASE"))
	hold, _ := time.ParseDuration(os.Getenv("MIN_HOLD"))
	out, pid := os.Getenv("OUT"), os.Getpid()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	locker, err := dlock.Open(ctx, os.Getenv("LOCK_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	var mu sync.Mutex
	var errs []string
	record := func(line string) {
		if err := appendLine(out, line); err != nil {
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}
	}
	once := dlockcron.Once(locker, os.Getenv("LOCK_KEY"), hold,
		dlockcron.WithLogger(cron.DiscardLogger),
		dlockcron.OnSkip(func(string) {
			record(fmt.Sprintf("skip %d %d", time.Now().Truncate(period).Unix(), pid))
		}),
		dlockcron.OnError(func(t dlockcron.Tick, err error) {
			mu.Lock()
			errs = append(errs, fmt.Sprintf("token %d: %v", t.Token, err))
			mu.Unlock()
		}))
	c := cron.New(cron.WithChain(once), cron.WithLogger(cron.DiscardLogger))
	c.Schedule(phased{phase}, dlockcron.Job(func(ctx context.Context, t dlockcron.Tick) error {
		record(fmt.Sprintf("run %d %d %d", t.Start.Truncate(period).Unix(), pid, t.Token))
		select {
		case <-time.After(body):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	c.Start()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	<-c.Stop().Done()
	if err := locker.Close(); err != nil {
		fmt.Println("error closing:", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		fmt.Println("error", e)
	}
	fmt.Println("closed")
	return 0
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Three processes run the same every-second job with their schedules
// 0.5 s apart (phases 0, 0.5 and 1 s: the first and the third fire at the
// same instant, the second half a period later) and a 0.3 s body: each
// tick runs exactly once, on one of them. Without the minimum hold the
// instance at phase 0.5 finds the key free again, the first run having
// released it, and runs the tick a second time.
func TestThreeProcessesRunEachTickOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"file", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"redis", func(t *testing.T) string { return testenv.Endpoint(t, "DLOCK_REDIS_URL") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := tc.url(t)
			runs := runInstances(t, url, testenv.Unique(t, "cron/report"), 3, 6)
			t.Logf("%s: %s", tc.name, runs.summary())
			runs.check(t, 3)
		})
	}
}

// ticks is what the instances recorded, tick by tick.
type ticks struct {
	window     []int64            // the ticks every instance was running for
	runs       map[int64][]int    // tick: the pids that ran it
	skips      map[int64]int      // tick: how many instances skipped it
	tokens     []dlock.Token      // every run's token, in the order of the file
	runsByProc map[int]int        // pid: runs in the window
	lines      map[int64][]string // tick: its lines, for failure messages
}

// runInstances starts n instances on url and key at phases 0.5 s apart,
// lets them run for window whole ticks after all are up, stops them (at
// the last tick, those at phase 0 right after their run), and reads the
// shared file.
func runInstances(t *testing.T, url, key string, n, window int) ticks {
	t.Helper()
	out := filepath.Join(t.TempDir(), "runs")
	type proc struct {
		phase  time.Duration
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Scanner
	}
	procs := make([]proc, n)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		phase := time.Duration(i) * period / 2 % period
		cmd.Env = append(os.Environ(), childEnv+"=1", "LOCK_URL="+url, "LOCK_KEY="+key,
			"OUT="+out, "PHASE="+phase.String(), "MIN_HOLD="+minHold.String())
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stdin.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		procs[i] = proc{phase, cmd, stdin, bufio.NewScanner(stdout)}
		// Start them 0.5 s apart too, as instances deployed one after another.
		time.Sleep(period / 2)
	}
	for i, p := range procs {
		if !p.stdout.Scan() || p.stdout.Text() != "ready" {
			t.Fatalf("instance %d did not start: %q %v", i, p.stdout.Text(), p.stdout.Err())
		}
	}
	first := time.Now().Truncate(period).Add(period)
	last := first.Add(time.Duration(window-1) * period)
	end := last.Add(period)
	var childErrs []string
	// stop closes the standard input of the instances at phase 0 (zero)
	// or of the others, and reads them until they have closed their
	// Lockers.
	stop := func(zero bool) {
		for _, p := range procs {
			if (p.phase == 0) == zero {
				p.stdin.Close()
			}
		}
		for i, p := range procs {
			if (p.phase == 0) != zero {
				continue
			}
			for p.stdout.Scan() && p.stdout.Text() != "closed" {
				childErrs = append(childErrs, fmt.Sprintf("instance %d: %s", i, p.stdout.Text()))
			}
		}
	}
	// The last tick: the instances at phase 0 stop once their run is over
	// (Cron.Stop, Locker.Close), before the late instance's schedule
	// fires; the minimum hold must outlive their Close, or the late one
	// runs the tick again.
	time.Sleep(time.Until(last.Add(body + 50*time.Millisecond)))
	stop(true)
	if closed := time.Now(); closed.After(last.Add(period / 2)) {
		t.Logf("the instances at phase 0 closed %v after the last tick, after the late instance had tried it: their Close was not tested", closed.Sub(last))
	}
	// The late instance's run of the last tick, if any, is over by then.
	time.Sleep(time.Until(end))
	stop(false)
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	for _, e := range childErrs {
		t.Error(e)
	}

	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	tk := ticks{runs: map[int64][]int{}, skips: map[int64]int{}, runsByProc: map[int]int{}, lines: map[int64][]string{}}
	for s := first; s.Before(end); s = s.Add(period) {
		tk.window = append(tk.window, s.Unix())
	}
	inWindow := func(tick int64) bool { return tick >= first.Unix() && tick < end.Unix() }
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("bad line %q", line)
		}
		tick, _ := strconv.ParseInt(f[1], 10, 64)
		pid, _ := strconv.Atoi(f[2])
		tk.lines[tick] = append(tk.lines[tick], line)
		switch f[0] {
		case "run":
			tok, _ := strconv.ParseUint(f[3], 10, 64)
			tk.tokens = append(tk.tokens, dlock.Token(tok))
			tk.runs[tick] = append(tk.runs[tick], pid)
			if inWindow(tick) {
				tk.runsByProc[pid]++
			}
		case "skip":
			tk.skips[tick]++
		}
	}
	return tk
}

// check asserts one run per tick of the window and n-1 skips, and tokens
// strictly increasing over every run.
func (tk ticks) check(t *testing.T, n int) {
	t.Helper()
	ran := 0
	for _, tick := range tk.window {
		r, s := len(tk.runs[tick]), tk.skips[tick]
		if r > 1 {
			t.Errorf("tick %d ran %d times: %q", tick, r, tk.lines[tick])
		}
		if r+s != n {
			t.Errorf("tick %d: %d runs and %d skips, want %d instances in all: %q", tick, r, s, n, tk.lines[tick])
		}
		if r > 0 {
			ran++
		}
	}
	// A tick is missed only when a store round trip is late by more than
	// 0.25 s (the margin of the minimum hold to the period): one is
	// tolerated on a loaded machine.
	if ran < len(tk.window)-1 {
		t.Errorf("%d of %d ticks ran, want all of them but at most one", ran, len(tk.window))
	}
	for i := 1; i < len(tk.tokens); i++ {
		if tk.tokens[i] <= tk.tokens[i-1] {
			t.Errorf("run %d: token %d after %d, want strictly increasing", i, tk.tokens[i], tk.tokens[i-1])
		}
	}
}

func (tk ticks) summary() string {
	var b strings.Builder
	for _, tick := range tk.window {
		fmt.Fprintf(&b, "tick %d: %d run(s), %d skip(s); ", tick%100, len(tk.runs[tick]), tk.skips[tick])
	}
	pids := make([]int, 0, len(tk.runsByProc))
	for pid := range tk.runsByProc {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		fmt.Fprintf(&b, "pid %d ran %d; ", pid, tk.runsByProc[pid])
	}
	return b.String()
}
