package lockctl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
)

const demoHelp = `Usage: lockctl demo [flags]

The race a lock prevents. A shop has --stock items; --workers workers sell
them concurrently, each reading the stock, pausing (a payment, a slow
query), then writing the stock back minus one and recording the order.

Without a lock, workers read the same stock before any writes it back:
more orders are taken than there were items (oversold). With the lock,
every read-modify-write runs alone: exactly --stock orders, stock 0.
By default both runs are shown side by side; they take seconds and need no
server (the lock is file://, or $DLOCK_URL, or --backend).

  lockctl demo
  lockctl demo --processes                      # workers are OS processes
  lockctl demo --backend redis://127.0.0.1:6379

Exits 0, 64 on a usage error, 69 on a backend error, and 1 if the locked
run oversold (which would mean the backend's lock is broken).
`

// demoConfig is a parsed lockctl demo command line.
type demoConfig struct {
	url       string
	stock     int
	workers   int
	pause     time.Duration
	processes bool
	noLock    bool
	lockOnly  bool
	json      bool
}

// demoResult is one run of the stock scenario.
type demoResult struct {
	Locked    bool          `json:"locked"`
	Backend   string        `json:"backend,omitempty"`
	Workers   int           `json:"workers"`
	Processes bool          `json:"processes"`
	Stock     int           `json:"stock"`
	Orders    int           `json:"orders"`
	StockLeft int           `json:"stock_left"`
	Oversold  int           `json:"oversold"` // orders the stock does not account for
	Elapsed   time.Duration `json:"elapsed_ns"`
	// TokensIncrease: every order's fencing token is greater than the
	// previous order's (locked runs).
	TokensIncrease bool    `json:"tokens_increase,omitempty"`
	OrderLog       []order `json:"orders_log,omitempty"`
}

func demoMain(ctx context.Context, args []string, sys IO) int {
	var cfg demoConfig
	fs := newFlags("demo", demoHelp, sys)
	fs.StringVar(&cfg.url, "backend", "", "backend `URL` of the lock (default $DLOCK_URL, else file://)")
	fs.IntVar(&cfg.stock, "stock", 20, "items in stock at the start")
	fs.IntVar(&cfg.workers, "workers", 8, "concurrent workers")
	fs.DurationVar(&cfg.pause, "pause", 2*time.Millisecond, "pause between reading the stock and writing it back")
	fs.BoolVar(&cfg.processes, "processes", false, "run the workers as OS processes (lockctl itself) sharing a stock file")
	fs.BoolVar(&cfg.noLock, "no-lock", false, "only the run without a lock")
	fs.BoolVar(&cfg.lockOnly, "lock-only", false, "only the run with the lock")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(sys.Stderr, "demo: unexpected argument %q (see lockctl demo --help)", fs.Arg(0))
	case cfg.stock < 1 || cfg.stock > 1_000_000:
		return usageError(sys.Stderr, "demo: --stock %d: want 1 to 1000000", cfg.stock)
	case cfg.workers < 1 || cfg.workers > 1000:
		return usageError(sys.Stderr, "demo: --workers %d: want 1 to 1000", cfg.workers)
	case cfg.pause < 0:
		return usageError(sys.Stderr, "demo: --pause %v: want a duration >= 0", cfg.pause)
	case cfg.noLock && cfg.lockOnly:
		return usageError(sys.Stderr, "demo: --no-lock and --lock-only exclude each other")
	}
	cfg.url = backendURL(cfg.url, sys)
	if cfg.processes && !cfg.noLock && strings.HasPrefix(strings.ToLower(cfg.url), "mem:") {
		return usageError(sys.Stderr, "demo: --processes needs a lock shared by processes: mem:// is in-process (use file:// or a server)")
	}

	var results []demoResult
	for _, locked := range []bool{false, true} {
		if locked && cfg.noLock || !locked && cfg.lockOnly {
			continue
		}
		res, err := demoRun(ctx, cfg, locked)
		if err != nil {
			return fail(sys.Stderr, err)
		}
		results = append(results, res)
	}
	if cfg.json {
		enc := json.NewEncoder(sys.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"runs": results})
	} else {
		printDemo(sys.Stdout, cfg, results)
	}
	for _, r := range results {
		if r.Locked && (r.Oversold != 0 || r.Orders != r.Stock) {
			return 1
		}
	}
	return 0
}

// demoRun runs the scenario once, with or without the lock.
func demoRun(ctx context.Context, cfg demoConfig, locked bool) (demoResult, error) {
	res := demoResult{Locked: locked, Workers: cfg.workers, Processes: cfg.processes, Stock: cfg.stock}
	url := ""
	if locked {
		url = cfg.url
		res.Backend = redact(cfg.url)
	}
	key := "lockctl-demo/" + randomHex(6)
	var (
		orders []order
		left   int
		err    error
	)
	start := time.Now()
	if cfg.processes {
		orders, left, err = demoProcesses(ctx, cfg, url, key)
	} else {
		orders, left, err = demoGoroutines(ctx, cfg, url, key)
	}
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, err
	}
	res.Orders, res.StockLeft, res.OrderLog = len(orders), left, orders
	res.Oversold = res.Orders - (cfg.stock - left)
	if locked {
		res.TokensIncrease = true
		for i := 1; i < len(orders); i++ {
			if orders[i].Token <= orders[i-1].Token {
				res.TokensIncrease = false
			}
		}
	}
	return res, nil
}

// demoGoroutines runs the workers as goroutines, each with a Locker of its
// own (as separate processes would have), on a stock in memory.
func demoGoroutines(ctx context.Context, cfg demoConfig, url, key string) ([]order, int, error) {
	s := &memShop{}
	s.v.Store(int64(cfg.stock))
	mutexes := make([]*dlock.Mutex, cfg.workers)
	if url != "" {
		for i := range mutexes {
			l, err := open(ctx, url)
			if err != nil {
				return nil, 0, err
			}
			defer l.Close()
			if mutexes[i], err = l.NewMutex(key); err != nil {
				return nil, 0, err
			}
		}
	}
	var (
		mu     sync.Mutex
		orders []order
		wg     sync.WaitGroup
		errs   = make([]error, cfg.workers)
		gate   = make(chan struct{})
	)
	record := func(o order) error {
		mu.Lock()
		orders = append(orders, o)
		mu.Unlock()
		return nil
	}
	for i := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate // start together
			errs[i] = sell(ctx, i, s, mutexes[i], cfg.pause, record)
		}()
	}
	close(gate)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	left, _ := s.read()
	return orders, left, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// printDemo prints the runs side by side.
func printDemo(w io.Writer, cfg demoConfig, rs []demoResult) {
	kind := "goroutines"
	if cfg.processes {
		kind = "OS processes"
	}
	fmt.Fprintf(w, "%d workers (%s) sell from a stock of %d: each reads the stock, pauses %v,\nthen writes it back minus one and records an order.\n\n",
		cfg.workers, kind, cfg.stock, cfg.pause)
	row := func(label string, f func(r demoResult) string) {
		line := fmt.Sprintf("  %-16s", label)
		for _, r := range rs {
			line += fmt.Sprintf("  %-22s", f(r))
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
	row("", func(r demoResult) string {
		if r.Locked {
			return "WITH A LOCK"
		}
		return "WITHOUT A LOCK"
	})
	row("lock", func(r demoResult) string {
		if r.Locked {
			return r.Backend
		}
		return "none"
	})
	row("orders taken", func(r demoResult) string { return fmt.Sprint(r.Orders) })
	row("stock left", func(r demoResult) string { return fmt.Sprint(r.StockLeft) })
	row("oversold", func(r demoResult) string { return fmt.Sprint(r.Oversold) })
	row("fencing tokens", func(r demoResult) string {
		switch {
		case !r.Locked:
			return "-"
		case r.TokensIncrease:
			return "increasing"
		default:
			return "NOT increasing"
		}
	})
	row("time", func(r demoResult) string { return r.Elapsed.Round(time.Millisecond).String() })
	row("result", func(r demoResult) string {
		if r.Oversold > 0 {
			return fmt.Sprintf("OVERSOLD by %d", r.Oversold)
		}
		if r.Orders == r.Stock && r.StockLeft == 0 {
			return "correct"
		}
		return "WRONG"
	})
	fmt.Fprintln(w)
	for _, r := range rs {
		switch {
		case !r.Locked && r.Oversold > 0:
			fmt.Fprintf(w, "Without a lock, %d orders were taken for %d items: workers read the same stock\nbefore any of them wrote it back, and each sold the same item again.\n",
				r.Orders, r.Stock)
		case !r.Locked:
			fmt.Fprintln(w, "Without a lock, this run happened not to oversell; run it again, or raise --workers or --pause.")
		case r.Oversold == 0 && r.Orders == r.Stock:
			fmt.Fprintf(w, "With the lock, each read-modify-write ran alone: %d orders for %d items.\n", r.Orders, r.Stock)
		default:
			fmt.Fprintf(w, "With the lock, %d orders for %d items: the backend's lock did not exclude!\n", r.Orders, r.Stock)
		}
	}
}
