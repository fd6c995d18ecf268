package lockctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
)

// demoWorkerCmd is the hidden subcommand a --processes demo starts its
// workers with (lockctl runs itself).
const demoWorkerCmd = "demo-worker"

// demoProcesses runs each worker as a lockctl process. They share a stock
// file and append their orders to one file; they start selling together,
// when every one has connected to the backend and said so.
func demoProcesses(ctx context.Context, cfg demoConfig, url, key string) ([]order, int, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("demo: cannot find lockctl's own executable: %w", err)
	}
	dir, err := os.MkdirTemp("", "lockctl-demo-")
	if err != nil {
		return nil, 0, err
	}
	defer os.RemoveAll(dir)
	stock, orders := fileShop{filepath.Join(dir, "stock")}, filepath.Join(dir, "orders")
	if err := stock.write(cfg.stock); err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type worker struct {
		cmd  *exec.Cmd
		in   io.WriteCloser
		out  *bufio.Reader
		errb strings.Builder
	}
	ws := make([]*worker, cfg.workers)
	defer func() {
		for _, w := range ws {
			if w != nil && w.cmd.Process != nil && w.cmd.ProcessState == nil {
				_ = w.cmd.Process.Kill()
				_ = w.cmd.Wait()
			}
		}
	}()
	for i := range ws {
		w := &worker{}
		args := []string{demoWorkerCmd, "--worker", strconv.Itoa(i), "--key", key,
			"--stock-file", stock.path, "--orders-file", orders, "--pause", cfg.pause.String()}
		if url != "" {
			args = append(args, "--backend", url)
		}
		w.cmd = exec.CommandContext(ctx, exe, args...)
		w.cmd.Stderr = &w.errb
		if w.in, err = w.cmd.StdinPipe(); err != nil {
			return nil, 0, err
		}
		out, err := w.cmd.StdoutPipe()
		if err != nil {
			return nil, 0, err
		}
		w.out = bufio.NewReader(out)
		if err := w.cmd.Start(); err != nil {
			return nil, 0, fmt.Errorf("demo: starting a worker: %w", err)
		}
		ws[i] = w
	}
	for i, w := range ws { // wait until all are connected
		line, err := w.out.ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			_ = w.cmd.Wait()
			return nil, 0, fmt.Errorf("demo: worker %d: %v %s", i, err, strings.TrimSpace(w.errb.String()))
		}
	}
	for _, w := range ws { // go
		_ = w.in.Close()
	}
	for i, w := range ws {
		if err := w.cmd.Wait(); err != nil {
			return nil, 0, fmt.Errorf("demo: worker %d: %v: %s", i, err, strings.TrimSpace(w.errb.String()))
		}
	}
	log, err := readOrders(orders)
	if err != nil {
		return nil, 0, err
	}
	left, err := stock.read()
	return log, left, err
}

// readOrders parses the orders file: one "worker seen token" line each.
func readOrders(path string) ([]order, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []order
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var o order
		if _, err := fmt.Sscan(line, &o.Worker, &o.Seen, &o.Token); err != nil {
			return nil, fmt.Errorf("demo: orders file line %q: %w", line, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// demoWorkerMain is one worker process of a --processes demo.
func demoWorkerMain(ctx context.Context, args []string, sys IO) int {
	fs := newFlags(demoWorkerCmd, "Usage: lockctl demo-worker (started by lockctl demo --processes)\n", sys)
	var (
		url, key, stockFile, ordersFile string
		worker                          int
		pause                           time.Duration
	)
	fs.StringVar(&url, "backend", "", "lock backend; none: no lock")
	fs.StringVar(&key, "key", "", "lock key")
	fs.StringVar(&stockFile, "stock-file", "", "stock file")
	fs.StringVar(&ordersFile, "orders-file", "", "orders file")
	fs.IntVar(&worker, "worker", 0, "worker number")
	fs.DurationVar(&pause, "pause", 0, "pause")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return code
	}
	if stockFile == "" || ordersFile == "" || (url != "" && key == "") {
		return usageError(sys.Stderr, "demo-worker: needs --stock-file, --orders-file, and --key with --backend")
	}
	var m *dlock.Mutex
	if url != "" {
		l, err := open(ctx, url)
		if err != nil {
			return fail(sys.Stderr, err)
		}
		defer l.Close()
		if m, err = l.NewMutex(key); err != nil {
			return fail(sys.Stderr, err)
		}
	}
	f, err := os.OpenFile(ordersFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	defer f.Close()
	fmt.Fprintln(sys.Stdout, "ready")
	_, _ = io.Copy(io.Discard, sys.Stdin) // the parent closes stdin: go
	record := func(o order) error {
		// One write per order: O_APPEND makes it atomic between processes.
		_, err := fmt.Fprintf(f, "%d %d %d\n", o.Worker, o.Seen, o.Token)
		return err
	}
	if err := sell(ctx, worker, fileShop{stockFile}, m, pause, record); err != nil {
		return fail(sys.Stderr, err)
	}
	return 0
}
