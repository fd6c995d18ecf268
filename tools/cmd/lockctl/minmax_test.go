package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// --min-hold keeps the lock held after the command ended, so that another
// run -n within it skips, until the minimum has passed from the
// acquisition; --max-hold releases the lock at its bound and signals the
// command as for a lost lock; bad values are usage errors.
func TestRunMinMaxHold(t *testing.T) {
	url := "file://" + t.TempDir()
	key := uniqueKey(t)
	const minHold = 3 * time.Second
	start := time.Now()
	r := runLockctl(t, 30*time.Second, "run", "--backend", url, "--ttl", "1s", "--min-hold", minHold.String(), "-n", key, "--", "true")
	if r.code != 0 {
		t.Fatalf("run --min-hold: exit %d; want 0\n%s", r.code, r.stderr)
	}
	r = runLockctl(t, 30*time.Second, "run", "--backend", url, "-n", key, "--", "true")
	switch since := time.Since(start); {
	case r.code == 0 && since < minHold-100*time.Millisecond:
		t.Fatalf("run -n %v after a run with --min-hold %v ran the command; want it skipped (exit %d)", since, minHold, lockctl.ExitNotAcquired)
	case r.code == 0:
		t.Logf("run -n came %v after the first run began, past its minimum hold: nothing to check", since)
	case r.code != lockctl.ExitNotAcquired:
		t.Fatalf("run -n during the minimum hold: exit %d; want %d\n%s", r.code, lockctl.ExitNotAcquired, r.stderr)
	default:
		r = runLockctl(t, 30*time.Second, "run", "--backend", url, "--wait", "20s", key, "--", "true")
		if r.code != 0 {
			t.Fatalf("run --wait 20s after the minimum hold: exit %d; want 0\n%s", r.code, r.stderr)
		}
		if since := time.Since(start); since < minHold-100*time.Millisecond {
			t.Errorf("the lock was free %v after the run with --min-hold %v began; want no sooner", since, minHold)
		}
	}

	r = runLockctl(t, 60*time.Second, "run", "--backend", url, "--ttl", "10s", "--max-hold", "1s", "--grace", "1s", uniqueKey(t), "--", "sleep", "30")
	if r.code != lockctl.ExitLockLost || !strings.Contains(r.stderr, "maximum hold") {
		t.Fatalf("run --max-hold 1s of a longer command: exit %d; want %d, saying the maximum hold was reached\n%s", r.code, lockctl.ExitLockLost, r.stderr)
	}

	for _, args := range [][]string{{"--min-hold", "-1s"}, {"--max-hold", "-1s"}, {"--min-hold", "2s", "--max-hold", "1s"}, {"--min-hold", "x"}} {
		r = runLockctl(t, 30*time.Second, append(append([]string{"run", "--backend", url}, args...), key, "--", "true")...)
		if r.code != lockctl.ExitUsage {
			t.Errorf("run %q: exit %d; want %d\n%s", args, r.code, lockctl.ExitUsage, r.stderr)
		}
	}
}
