package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type demoRun struct {
	Locked         bool `json:"locked"`
	Stock          int  `json:"stock"`
	Orders         int  `json:"orders"`
	StockLeft      int  `json:"stock_left"`
	Oversold       int  `json:"oversold"`
	TokensIncrease bool `json:"tokens_increase"`
}

// checkDemo checks the two runs: oversold without the lock, exact with it.
func checkDemo(t *testing.T, runs []demoRun) {
	t.Helper()
	if len(runs) != 2 || runs[0].Locked || !runs[1].Locked {
		t.Fatalf("runs %+v; want one without and one with the lock", runs)
	}
	free, locked := runs[0], runs[1]
	if free.Oversold <= 0 || free.Orders <= free.Stock {
		t.Errorf("without a lock: %+v; want more orders than stock (oversold)", free)
	}
	if locked.Oversold != 0 || locked.Orders != locked.Stock || locked.StockLeft != 0 || !locked.TokensIncrease {
		t.Errorf("with the lock: %+v; want orders == stock, stock left 0, tokens increasing", locked)
	}
}

func demoJSON(t *testing.T, args ...string) []demoRun {
	t.Helper()
	r := runLockctl(t, 2*time.Minute, append([]string{"demo", "--json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("lockctl demo %v: exit %d\n%s", args, r.code, r.stderr)
	}
	var out struct{ Runs []demoRun }
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("demo --json: %v\n%s", err, r.stdout)
	}
	return out.Runs
}

// The README's first command: the text shows the oversell without the lock
// and none with it, side by side.
func TestDemoText(t *testing.T) {
	r := runLockctl(t, 2*time.Minute, "demo", "--backend", "file://"+t.TempDir())
	if r.code != 0 {
		t.Fatalf("lockctl demo: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"WITHOUT A LOCK", "WITH A LOCK", "OVERSOLD by", "correct", "orders taken", "stock left"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("\n%s", r.stdout)
}

func TestDemoGoroutines(t *testing.T) {
	checkDemo(t, demoJSON(t, "--backend", "file://"+t.TempDir()))
	checkDemo(t, demoJSON(t, "--backend", "mem://"))
}

func TestDemoProcesses(t *testing.T) {
	checkDemo(t, demoJSON(t, "--processes", "--workers", "4", "--backend", "file://"+t.TempDir()))
}
