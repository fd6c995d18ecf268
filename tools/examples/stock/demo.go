package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
)

// childEnv marks a process started by the demo as a worker. The stock
// binary ignores it; a test binary that re-executes itself uses it to run
// the command instead of the tests.
const childEnv = "DLOCK_STOCK_CHILD"

// demoConfig is the demo's settings; its workerConfig is passed on to the
// workers.
type demoConfig struct {
	workerConfig
	workers int
	qty     int
}

func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c demoConfig
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	c.workerConfig.register(fs)
	fs.IntVar(&c.workers, "workers", 3, "worker processes (the first is the one paused)")
	fs.IntVar(&c.qty, "qty", 5, "the stock to start with")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	r, err := demo(ctx, c, stdout, stderr)
	if err != nil {
		return err
	}
	if r.oversold() {
		return errOversold
	}
	return nil
}

func (c demoConfig) check() error {
	if c.workers < 2 {
		return fmt.Errorf("%w: -workers must be at least 2 (one to pause, one to take over)", errUsage)
	}
	if c.qty < 1 {
		return fmt.Errorf("%w: -qty must be at least 1", errUsage)
	}
	if err := positive("ttl", c.ttl); err != nil {
		return err
	}
	return positive("work", c.work)
}

// demoResult is what the demo saw.
type demoResult struct {
	initial int
	tally
	pausedToken   dlock.Token // worker 1's token when it was paused
	pausedRefused bool        // its write was refused after it resumed
	pausedSold    bool        // its write landed after it resumed
}

func (r demoResult) oversold() bool { return r.Qty < 0 || r.Sold != r.initial-r.Qty }

// demo sets the stock, starts worker 1 and stops it (SIGSTOP) right after
// its fenced read, while it holds the lock and prepares a sale. Its lease
// runs out; workers 2..n take the lock with higher tokens and sell the
// stock. Then worker 1 is resumed (SIGCONT) and tries to write with its old
// token: the fence refuses it.
func demo(ctx context.Context, c demoConfig, out, errOut io.Writer) (demoResult, error) {
	r := demoResult{initial: c.qty}
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	db, err := openDB(ctx, c.pg)
	if err != nil {
		return r, err
	}
	defer db.Close()
	if err := setup(ctx, db, c.sku, c.qty); err != nil {
		return r, err
	}
	mode := "fenced"
	if c.unfenced {
		mode = "UNFENCED"
	}
	fmt.Fprintf(out, "== %s: %d in stock, %d workers, lock %s (lease %v), %s\n", c.sku, c.qty, c.workers, c.backend, c.ttl, mode)

	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	start := func(id int, work time.Duration) (*proc, error) {
		wc := c.workerConfig
		wc.id, wc.work = id, work
		p, err := startWorker(self, wc, out, errOut)
		if err == nil {
			procs = append(procs, p)
		}
		return p, err
	}

	// Worker 1 works slowly enough for the SIGSTOP to land while it
	// prepares its sale.
	paused, err := start(1, max(3*c.ttl, time.Second))
	if err != nil {
		return r, err
	}
	ev, err := paused.firstRead(ctx)
	if err != nil {
		return r, fmt.Errorf("waiting for worker 1 to read the stock: %w", err)
	}
	r.pausedToken = dlock.Token(ev.num("token"))
	if err := paused.signal(syscall.SIGSTOP); err != nil {
		return r, err
	}
	fmt.Fprintf(out, "== paused worker 1 (SIGSTOP) holding token %d, after it read qty=%d; its lease will run out\n",
		r.pausedToken, ev.num("qty"))

	for id := 2; id <= c.workers; id++ {
		if _, err := start(id, c.work); err != nil {
			return r, err
		}
	}
	for _, p := range procs[1:] {
		if err := p.wait(ctx); err != nil {
			return r, fmt.Errorf("worker %d: %w", p.id, err)
		}
	}
	fmt.Fprintf(out, "== workers 2..%d are done; resuming worker 1 (SIGCONT)\n", c.workers)
	if err := paused.signal(syscall.SIGCONT); err != nil {
		return r, err
	}
	if err := paused.wait(ctx); err != nil {
		return r, fmt.Errorf("worker 1: %w", err)
	}
	for _, e := range paused.events { // complete: the worker has exited
		if e.num("token") == int64(r.pausedToken) {
			r.pausedRefused = r.pausedRefused || e.name == "refused" && e.fields["op"] == "write"
			r.pausedSold = r.pausedSold || e.name == "sold"
		}
	}

	if r.tally, err = readTally(ctx, db, c.sku); err != nil {
		return r, err
	}
	switch {
	case r.pausedRefused:
		fmt.Fprintf(out, "== worker 1's write with token %d was refused: a newer holder had read the row\n", r.pausedToken)
	case r.pausedSold:
		fmt.Fprintf(out, "== worker 1's write with token %d landed after its lease had run out\n", r.pausedToken)
	}
	verdict := "no oversell"
	if r.oversold() {
		verdict = fmt.Sprintf("OVERSOLD by %d", r.Sold-c.qty)
	}
	fmt.Fprintf(out, "== result: %d in stock at the start, %d left, %d sold: %s\n", c.qty, r.Qty, r.Sold, verdict)
	return r, nil
}

// event is one line of a worker's output: "name key=value ...".
type event struct {
	worker int
	name   string
	fields map[string]string
}

func (e event) num(key string) int64 {
	n, _ := strconv.ParseInt(e.fields[key], 10, 64)
	return n
}

func parseEvent(line string) (event, bool) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return event{}, false
	}
	e := event{name: f[0], fields: map[string]string{}}
	for _, kv := range f[1:] {
		if k, v, ok := strings.Cut(kv, "="); ok {
			e.fields[k] = v
		}
	}
	id, err := strconv.Atoi(e.fields["worker"])
	if err != nil {
		return event{}, false
	}
	e.worker = id
	return e, true
}

// proc is a running worker process.
type proc struct {
	id     int
	cmd    *exec.Cmd
	read   chan event    // receives the worker's first "read" event
	done   chan struct{} // closed when it has exited
	err    error         // its exit error, once done
	events []event       // all its events, complete once done
}

func startWorker(self string, c workerConfig, out, errOut io.Writer) (*proc, error) {
	cmd := exec.Command(self, append([]string{"worker"}, c.args()...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %d: %w", c.id, err)
	}
	p := &proc{id: c.id, cmd: cmd, read: make(chan event, 1), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintf(out, "   [%d] %s\n", c.id, sc.Text())
			e, ok := parseEvent(sc.Text())
			if !ok {
				continue
			}
			p.events = append(p.events, e)
			if e.name == "read" {
				select {
				case p.read <- e:
				default: // only the first is wanted
				}
			}
		}
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// firstRead waits for the worker's first fenced read.
func (p *proc) firstRead(ctx context.Context) (event, error) {
	select {
	case e := <-p.read:
		return e, nil
	case <-p.done:
		return event{}, errors.Join(errors.New("the worker exited"), p.err)
	case <-ctx.Done():
		return event{}, ctx.Err()
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal worker %d: %w", p.id, err)
	}
	return nil
}

func (p *proc) wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill ends a worker that is still running, stopped or not.
func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
