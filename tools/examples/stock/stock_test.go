package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// TestMain lets the demo re-execute the test binary as its worker
// processes: a child runs the command line instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// lockedBuffer collects the demo's output from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// backends are the cross-process lock backends the demo is tested with.
func backends(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"file":  func(t *testing.T) string { return "file://" + t.TempDir() },
		"redis": func(t *testing.T) string { return testenv.Endpoint(t, "DLOCK_REDIS_URL") },
	}
}

func demoConfigFor(t *testing.T, backend string, unfenced bool) demoConfig {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	sku := "test-" + hex.EncodeToString(b)
	c := demoConfig{workers: 3, qty: 4}
	c.pg = testenv.Endpoint(t, "DLOCK_POSTGRES_URL")
	c.sku = sku
	c.backend = backend
	c.ttl = time.Second
	c.work = 50 * time.Millisecond
	c.unfenced = unfenced
	t.Cleanup(func() {
		db, err := openDB(context.Background(), c.pg)
		if err != nil {
			return
		}
		defer db.Close()
		db.Exec(`DELETE FROM stock_sale WHERE sku = $1`, sku)
		db.Exec(`DELETE FROM stock WHERE sku = $1`, sku)
	})
	return c
}

func runDemo(t *testing.T, c demoConfig) demoResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out lockedBuffer
	r, err := demo(ctx, c, &out, &out)
	t.Logf("demo output:\n%s", out.String())
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	return r
}

// TestPausedWorkerRefused: worker 1 is stopped with SIGSTOP after its
// fenced read, its lease runs out, the others sell everything with higher
// tokens; resumed with SIGCONT, worker 1 writes with its old token and the
// fence refuses it. Nothing is oversold and the stock never goes negative.
func TestPausedWorkerRefused(t *testing.T) {
	for name, url := range backends(t) {
		t.Run(name, func(t *testing.T) {
			c := demoConfigFor(t, url(t), false)
			r := runDemo(t, c)
			if !r.pausedRefused || r.pausedSold {
				t.Errorf("paused worker's write: refused %v, landed %v; want refused", r.pausedRefused, r.pausedSold)
			}
			if r.Qty != 0 || r.Sold != c.qty || r.oversold() {
				t.Errorf("%d left, %d sold of %d: want 0 left, all sold once", r.Qty, r.Sold, c.qty)
			}
			if r.Fence <= r.pausedToken {
				t.Errorf("row fence %d is not above the paused token %d", r.Fence, r.pausedToken)
			}
			assertNoSaleWith(t, c, r)
		})
	}
}

// TestPausedWorkerUnfenced is the control: the same run without the fence
// oversells, so the test above would see a missing fence.
func TestPausedWorkerUnfenced(t *testing.T) {
	c := demoConfigFor(t, "file://"+t.TempDir(), true)
	r := runDemo(t, c)
	if !r.pausedSold {
		t.Fatalf("unfenced: the paused worker's write did not land; the demo did not pause it in time")
	}
	if !r.oversold() || r.Qty != -1 || r.Sold != c.qty+1 {
		t.Errorf("unfenced: %d left, %d sold of %d; want -1 left and one item oversold", r.Qty, r.Sold, c.qty)
	}
}

// assertNoSaleWith checks the sales table directly: no sale carries the
// paused worker's token.
func assertNoSaleWith(t *testing.T, c demoConfig, r demoResult) {
	t.Helper()
	db, err := openDB(context.Background(), c.pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM stock_sale WHERE sku = $1 AND token = $2`, c.sku, int64(r.pausedToken)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d sales recorded with the paused worker's stale token", n)
	}
}

func TestCommandLine(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "usage"},
		{[]string{"nope"}, 2, "unknown command"},
		{[]string{"demo", "-workers", "1"}, 2, "at least 2"},
		{[]string{"demo", "-qty", "0"}, 2, "at least 1"},
		{[]string{"worker", "-ttl", "0"}, 2, "positive"},
		{[]string{"worker", "-bogus"}, 2, "bogus"},
		{[]string{"setup", "extra"}, 2, "unexpected argument"},
		{[]string{"worker", "-backend", "nosuch://x"}, 1, "unknown scheme"},
		{[]string{"help"}, 0, "usage"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(ctx, c.args, &out, &errOut)
		if code != c.code || !strings.Contains(out.String()+errOut.String(), c.msg) {
			t.Errorf("stock %q: exit %d, output %q; want exit %d mentioning %q",
				c.args, code, out.String()+errOut.String(), c.code, c.msg)
		}
	}
}

// TestWorkerWithoutRow: a worker on a SKU that was never set up fails
// with a message saying so, instead of selling from nothing.
func TestWorkerWithoutRow(t *testing.T) {
	c := demoConfigFor(t, "file://"+t.TempDir(), false)
	db, err := openDB(context.Background(), c.pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"worker", "-pg", c.pg, "-sku", c.sku, "-backend", c.backend}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "run stock setup") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}
