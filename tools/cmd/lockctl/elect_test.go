package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// lockctl elect: the first candidate runs its command while it leads; a
// second waits (its command does not start), and one with --wait gives up
// with 75; "lockctl status" names the leader's value; when leadership is
// broken from outside, the leader's command gets SIGTERM and lockctl exits
// 76; the second candidate then leads with a greater term, and exits with
// its command's status, resigning.
func TestElectTakeover(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		name := uniqueKey(t)
		dir := t.TempDir()
		ready, mark := filepath.Join(dir, "ready"), filepath.Join(dir, "mark")
		termA, termB := filepath.Join(dir, "term-a"), filepath.Join(dir, "term-b")
		ttl := b.ttl.String()
		first := command("elect", "--backend", url, "--ttl", ttl, "--grace", "5s", "--value", "candidate a", name, "--", "sh", "-c",
			`trap 'echo TERM >> "$MARK"; exit 0' TERM; echo "$DLOCK_TOKEN" > "$TERM_A"; touch "$READY"; while :; do sleep 0.02; done`)
		first.Env = append(first.Env, "READY="+ready, "MARK="+mark, "TERM_A="+termA)
		fp := start(t, first)
		fp.waitFile(t, ready, 30*time.Second)

		second := command("elect", "--backend", url, "--ttl", ttl, "--value", "candidate b", name, "--", "sh", "-c",
			`echo "$DLOCK_TOKEN" > "$TERM_B"; exit 3`)
		second.Env = append(second.Env, "TERM_B="+termB)
		sp := start(t, second)

		r := runLockctl(t, time.Minute, "elect", "--backend", url, "--ttl", ttl, "--wait", "1s", name, "--", "true")
		if r.code != lockctl.ExitNotAcquired || !strings.Contains(r.stderr, `"candidate a"`) {
			t.Fatalf("a third candidate with --wait 1s: exit %d; want %d naming the leader\n%s", r.code, lockctl.ExitNotAcquired, r.stderr)
		}
		select {
		case <-sp.done:
			t.Fatalf("the second candidate exited while the first led\n%s", sp.errOut.String())
		default:
		}
		if _, err := os.Stat(termB); err == nil {
			t.Fatal("the second candidate's command ran while the first led")
		}
		st := runLockctl(t, time.Minute, "status", "--backend", url, "--json", name)
		if st.code != 1 || !strings.Contains(st.stdout, `"owner": "candidate a"`) {
			t.Fatalf("status of the election: exit %d\n%s%s", st.code, st.stdout, st.stderr)
		}

		if br := runLockctl(t, time.Minute, "break", "--backend", url, "--force", name); br.code != 0 {
			t.Fatalf("break: exit %d\n%s", br.code, br.stderr)
		}
		r = fp.wait(t, time.Minute)
		if r.code != lockctl.ExitLockLost || !strings.Contains(r.stderr, "leadership of") {
			t.Fatalf("first candidate after its leadership was broken: exit %d; want %d\n%s", r.code, lockctl.ExitLockLost, r.stderr)
		}
		if got := readLines(t, mark); len(got) != 1 || got[0] != "TERM" {
			t.Fatalf("the leader's command's marks %q; want one TERM", got)
		}
		r = sp.wait(t, time.Minute)
		if r.code != 3 {
			t.Fatalf("second candidate: exit %d; want its command's 3\n%s", r.code, r.stderr)
		}
		t1, _ := strconv.ParseUint(strings.TrimSpace(readLines(t, termA)[0]), 10, 64)
		t2, _ := strconv.ParseUint(strings.TrimSpace(readLines(t, termB)[0]), 10, 64)
		if t1 == 0 || t2 <= t1 {
			t.Fatalf("terms: first leader %d, second %d; want the second larger", t1, t2)
		}
		// The second resigned when its command ended.
		if st := runLockctl(t, time.Minute, "status", "--backend", url, name); st.code != 0 {
			t.Fatalf("status after the last leader's command ended: exit %d; want 0 (no leader)\n%s%s", st.code, st.stdout, st.stderr)
		}
	})
}

// Bad command lines are usage errors (64).
func TestElectUsage(t *testing.T) {
	url := "file://" + t.TempDir()
	for _, args := range [][]string{
		{"elect", "--backend", url},
		{"elect", "--backend", url, "name"},
		{"elect", "--backend", url, "--wait", "0", "name", "--", "true"},
		{"elect", "--backend", url, "--value", "bad\xff", "name", "--", "true"},
		{"elect", "--backend", url, "", "--", "true"},
		{"elect", "--backend", url, "--on-lost", "hup", "name", "--", "true"},
	} {
		if r := runLockctl(t, 30*time.Second, args...); r.code != lockctl.ExitUsage {
			t.Errorf("lockctl %q: exit %d; want %d\n%s", args, r.code, lockctl.ExitUsage, r.stderr)
		}
	}
}
