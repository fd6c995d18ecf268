package faults

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// cell is one scenario × backend result for the table.
type cell struct {
	scenario, backend string
	verdict           string // pass, violation-detected, FAIL
	detail            string
}

var results = struct {
	sync.Mutex
	cells []cell
}{}

func record(c cell) {
	results.Lock()
	results.cells = append(results.cells, c)
	results.Unlock()
}

// expect says what a cell must show. Every check named in must has to pass;
// when canary is set, at least one of its checks must find a violation, or
// the harness is blind and the cell fails.
type expect struct {
	must   []string
	canary []string
	extra  []Check // checks of the scenario's own that must pass too
	// canaryExtra are canary checks of the scenario's own: with canary,
	// at least one of all of them must find a violation.
	canaryExtra []Check
}

var allChecks = []string{"exclusion", "lost-updates", "stale-token", "monotone-tokens", "loss-before-expiry", "liveness"}

func checksOf(h History, liveness time.Duration) map[string]Check {
	out := map[string]Check{}
	for _, c := range []Check{CheckExclusion(h), CheckLostUpdates(h), CheckStaleTokens(h),
		CheckMonotoneTokens(h), CheckLossBeforeExpiry(h), CheckLiveness(h, liveness)} {
		out[c.Name] = c
	}
	return out
}

func counts(h History) string {
	n := map[string]int{}
	for _, e := range h.Events {
		n[e.Kind]++
	}
	return fmt.Sprintf("acq=%d writes=%d rejects=%d lost=%d errors=%d", n[EvAcquire], n[EvWrite], n[EvReject], n[EvLost], n[EvError])
}

// judge applies an expectation to a history, fails t where it is not met,
// and records the cell.
func judge(t *testing.T, scenario string, b Backend, h History, e expect) {
	t.Helper()
	checks := checksOf(h, b.TTL+b.Grace+b.Liveness)
	var failed []string
	for _, name := range e.must {
		if c := checks[name]; !c.OK() {
			failed = append(failed, fmt.Sprintf("%s: %d (%s)", name, c.Violations, c.Detail))
		}
	}
	var notes []string // what the scenario's own checks saw
	for _, c := range e.extra {
		if !c.OK() {
			failed = append(failed, fmt.Sprintf("%s: %d (%s)", c.Name, c.Violations, c.Detail))
		} else {
			notes = append(notes, c.Name+": "+c.Detail)
		}
	}
	var seen []string
	for _, name := range e.canary {
		if c := checks[name]; !c.OK() {
			seen = append(seen, fmt.Sprintf("%s: %d", name, c.Violations))
		}
	}
	for _, c := range e.canaryExtra {
		if !c.OK() {
			seen = append(seen, fmt.Sprintf("%s: %d", c.Name, c.Violations))
		}
	}
	canary := len(e.canary)+len(e.canaryExtra) > 0
	c := cell{scenario: scenario, backend: b.Name}
	switch {
	case len(failed) > 0:
		c.verdict = "FAIL"
		c.detail = strings.Join(failed, "; ")
		t.Errorf("%s on %s: %s [%s]", scenario, b.Name, c.detail, counts(h))
	case canary && len(seen) == 0:
		c.verdict = "FAIL"
		c.detail = "canary saw no violation: the harness is blind"
		t.Errorf("%s on %s: %s [%s]", scenario, b.Name, c.detail, counts(h))
	case canary:
		c.verdict = "violation-detected"
		c.detail = strings.Join(seen, ", ")
	default:
		c.verdict = "pass"
		c.detail = strings.Join(notes, "; ")
	}
	c.detail = strings.TrimPrefix(strings.Join([]string{c.detail, counts(h)}, "; "), "; ")
	t.Logf("%s on %s: %s: %s", scenario, b.Name, c.verdict, c.detail)
	record(c)
}

func TestMain(m *testing.M) {
	MaybeWorker()
	code := m.Run()
	if path := os.Getenv("DLOCK_FAULTS_REPORT"); path != "" {
		if err := writeReport(path); err != nil {
			fmt.Fprintln(os.Stderr, "faults report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func writeReport(path string) error {
	results.Lock()
	defer results.Unlock()
	var scenarios, backends []string
	seenS, seenB := map[string]bool{}, map[string]bool{}
	byCell := map[[2]string]cell{}
	for _, c := range results.cells {
		if !seenS[c.scenario] {
			seenS[c.scenario] = true
			scenarios = append(scenarios, c.scenario)
		}
		if !seenB[c.backend] {
			seenB[c.backend] = true
			backends = append(backends, c.backend)
		}
		byCell[[2]string{c.scenario, c.backend}] = c
	}
	sort.Strings(backends)
	// The lanes finish their cells in no set order: rows go by scenario
	// number ("5" before "5b" before "6"), and in the order they ran within
	// one number.
	sort.SliceStable(scenarios, func(i, j int) bool { return scenarioRank(scenarios[i]) < scenarioRank(scenarios[j]) })
	var b strings.Builder
	b.WriteString("# Fault suite results\n\n")
	b.WriteString("Produced by `make faults` (go test -tags faults ./tools/faults/). Each cell: pass (every required check held), " +
		"violation-detected (a canary without fencing showed the violation it must show), or FAIL. " +
		"Counts: acquisitions, accepted writes, rejected (fenced) operations, losses reported, errors.\n\n")
	b.WriteString("| scenario | " + strings.Join(backends, " | ") + " |\n|---|")
	b.WriteString(strings.Repeat("---|", len(backends)) + "\n")
	for _, s := range scenarios {
		b.WriteString("| " + s + " |")
		for _, bk := range backends {
			c, ok := byCell[[2]string{s, bk}]
			if !ok {
				b.WriteString(" — |")
				continue
			}
			fmt.Fprintf(&b, " **%s**<br>%s |", c.verdict, strings.ReplaceAll(c.detail, "|", "/"))
		}
		b.WriteString("\n")
	}
	b.WriteString(reportNotes)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// scenarioRank orders a scenario by the number and letter it starts with:
// "5 ..." 500, "5b ..." 502, "16 ..." 1600.
func scenarioRank(s string) int {
	n, i := 0, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = 10*n + int(s[i]-'0')
	}
	r := 100 * n
	if i < len(s) && s[i] >= 'a' && s[i] <= 'z' {
		r += int(s[i]-'a') + 1
	}
	return r
}

// ctx returns a context for launcher calls.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}
