package main_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// lockctl run --readers 2: two readers run their commands at once; a
// writer that asks while they run is refused (-n), or waits and runs
// after both, alone, with a token above theirs; a reader that asks while
// the writer waits runs after the writer. A lockctl with another number of
// readers is refused with the usage status.
func TestRunReadersWriter(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		key := uniqueKey(t)
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		ttl := b.ttl.String()
		// Each command logs its start and end with its mode and token.
		script := `echo "start $DLOCK_LOCK_MODE $DLOCK_TOKEN $$" >> "$LOG"; touch "$READY"; sleep "$HOLD"; echo "end $DLOCK_LOCK_MODE $DLOCK_TOKEN $$" >> "$LOG"`
		startRun := func(name, hold string, args ...string) *proc {
			cmd := command(append(append([]string{"run", "--backend", url, "--ttl", ttl, "--readers", "2"}, args...), key, "--", "sh", "-c", script)...)
			cmd.Env = append(cmd.Env, "LOG="+log, "READY="+filepath.Join(dir, name), "HOLD="+hold)
			return start(t, cmd)
		}
		r1 := startRun("r1", "3", "--read")
		r1.waitFile(t, filepath.Join(dir, "r1"), 30*time.Second)
		r2 := startRun("r2", "3", "--read")
		r2.waitFile(t, filepath.Join(dir, "r2"), 30*time.Second)
		if r := runLockctl(t, 30*time.Second, "run", "--backend", url, "--readers", "2", "-n", key, "--", "true"); r.code != lockctl.ExitNotAcquired {
			t.Fatalf("a writer with -n while two readers run: exit %d, %q; want %d", r.code, r.stderr, lockctl.ExitNotAcquired)
		}
		if r := runLockctl(t, 30*time.Second, "run", "--backend", url, "--readers", "3", "--read", key, "--", "true"); r.code != lockctl.ExitUsage || !strings.Contains(r.stderr, "readers") {
			t.Fatalf("--readers 3 beside readers of 2: exit %d, %q; want %d and a hint", r.code, r.stderr, lockctl.ExitUsage)
		}
		w := startRun("w", "0.5")
		time.Sleep(time.Second) // the writer holds the gate, waiting for the readers
		r3 := startRun("r3", "0.1", "--read")
		for _, p := range []*proc{r1, r2, w, r3} {
			if r := p.wait(t, 60*time.Second); r.code != 0 {
				t.Fatalf("%v: exit %d, %s", p.cmd.Args, r.code, r.stderr)
			}
		}
		lines := readLines(t, log)
		if len(lines) != 8 {
			t.Fatalf("%d marks; want 8:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		// The marks, in order: both readers start, both end, the writer
		// starts and ends alone, then the third reader.
		var modes []string
		var readTok, writeTok uint64
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 4 {
				t.Fatalf("mark %q", l)
			}
			modes = append(modes, f[0]+" "+f[1])
			tok, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil || tok == 0 {
				t.Fatalf("DLOCK_TOKEN in %q: want a token", l)
			}
			if f[1] == "write" {
				writeTok = tok
			} else if writeTok == 0 {
				readTok = max(readTok, tok)
			}
		}
		want := "start read,start read,end read,end read,start write,end write,start read,end read"
		if got := strings.Join(modes, ","); got != want {
			t.Fatalf("marks in the order %s; want %s:\n%s", got, want, strings.Join(lines, "\n"))
		}
		if writeTok <= readTok {
			t.Fatalf("writer's token %d not above the readers' %d", writeTok, readTok)
		}
	})
}
