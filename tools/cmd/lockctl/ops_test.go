package main_test

import (
	"encoding/json"

	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// statusDoc is lockctl status --json's document.
type statusDoc struct {
	Backend string `json:"backend"`
	Keys    []struct {
		Key         string  `json:"key"`
		Held        bool    `json:"held"`
		Token       uint64  `json:"token"`
		LeaseLeftMS float64 `json:"lease_left_ms"`
		Owner       string  `json:"owner"`
		Waiters     *int    `json:"waiters"`
	} `json:"keys"`
}

func statusJSON(t *testing.T, url string, keys ...string) (statusDoc, int) {
	t.Helper()
	r := runLockctl(t, time.Minute, append([]string{"status", "--json", "--backend", url}, keys...)...)
	if r.code != 0 && r.code != lockctl.ExitHeld {
		t.Fatalf("lockctl status: exit %d\n%s", r.code, r.stderr)
	}
	var doc statusDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	if len(doc.Keys) != len(keys) {
		t.Fatalf("status --json: %d keys; want %d", len(doc.Keys), len(keys))
	}
	return doc, r.code
}

// holdKey starts lockctl run holding key with a command that records its
// token and a TERM in files; it returns once the command runs.
func holdKey(t *testing.T, b backend, url, key string) (p *proc, tokenFile, mark string) {
	t.Helper()
	dir := t.TempDir()
	ready, mark, tokenFile := filepath.Join(dir, "ready"), filepath.Join(dir, "mark"), filepath.Join(dir, "token")
	cmd := command("run", "--backend", url, "--ttl", b.ttl.String(), "--grace", "5s", key, "--", "sh", "-c",
		`trap 'echo TERM >> "$MARK"; exit 0' TERM; echo "$DLOCK_TOKEN" > "$TOKEN"; touch "$READY"; while :; do sleep 0.02; done`)
	cmd.Env = append(cmd.Env, "READY="+ready, "MARK="+mark, "TOKEN="+tokenFile)
	p = start(t, cmd)
	p.waitFile(t, ready, 30*time.Second)
	return p, tokenFile, mark
}

func readToken(t *testing.T, path string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimSpace(readLines(t, path)[0]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lockctl status reports a free key with exit 0, and a key held by a
// lockctl run with exit 1, its token (the command's DLOCK_TOKEN), a lease
// left within the TTL and the holder's default owner description (its
// PID); the table says the same for people.
func TestStatus(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		key, other := uniqueKey(t), uniqueKey(t)+"-other"
		doc, code := statusJSON(t, url, key)
		if code != 0 || doc.Keys[0].Held || doc.Keys[0].Token != 0 || doc.Keys[0].Key != key {
			t.Fatalf("free key: exit %d, %+v; want 0 and not held", code, doc.Keys[0])
		}
		p, tokenFile, _ := holdKey(t, b, url, key)
		doc, code = statusJSON(t, url, other, key)
		got := doc.Keys[1]
		if code != lockctl.ExitHeld || !got.Held || doc.Keys[0].Held {
			t.Fatalf("held key: exit %d, %+v; want %d, held (and %q free)", code, doc.Keys, lockctl.ExitHeld, other)
		}
		if want := readToken(t, tokenFile); got.Token != want {
			t.Errorf("status token %d; the holder's DLOCK_TOKEN is %d", got.Token, want)
		}
		if got.LeaseLeftMS < 0 || got.LeaseLeftMS > float64(b.ttl.Milliseconds())*2 {
			t.Errorf("lease left %vms; want within the TTL %v", got.LeaseLeftMS, b.ttl)
		}
		if want := "pid=" + strconv.Itoa(p.cmd.Process.Pid) + " prog=lockctl"; !strings.Contains(got.Owner, want) {
			t.Errorf("owner %q; want the holder's %q", got.Owner, want)
		}
		if got.Waiters != nil && *got.Waiters != 0 {
			t.Errorf("waiters %d; want 0", *got.Waiters)
		}
		table := runLockctl(t, time.Minute, "status", "--backend", url, key)
		if table.code != lockctl.ExitHeld || !strings.Contains(table.stdout, "KEY") ||
			!strings.Contains(table.stdout, strconv.FormatUint(got.Token, 10)) || !strings.Contains(table.stdout, " yes ") {
			t.Errorf("status table: exit %d\n%s%s", table.code, table.stdout, table.stderr)
		}
	})
}

// lockctl break refuses without --force and changes nothing; with --force
// it removes the hold and says what it removed. The broken holder's
// lockctl run notices at its next renewal: its command gets SIGTERM and it
// exits 76. The next holder's token is higher than the broken one's.
func TestBreak(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		key := uniqueKey(t)
		p, tokenFile, mark := holdKey(t, b, url, key)
		broken := readToken(t, tokenFile)

		r := runLockctl(t, time.Minute, "break", "--backend", url, key)
		if r.code != lockctl.ExitUsage || !strings.Contains(r.stderr, "--force") {
			t.Fatalf("break without --force: exit %d, %q; want %d and a refusal", r.code, r.stderr, lockctl.ExitUsage)
		}
		if doc, code := statusJSON(t, url, key); code != lockctl.ExitHeld || doc.Keys[0].Token != broken {
			t.Fatalf("after a refused break: exit %d, %+v; want still held with token %d", code, doc.Keys[0], broken)
		}

		r = runLockctl(t, time.Minute, "break", "--force", "--backend", url, key)
		if r.code != 0 || !strings.Contains(r.stdout, "token "+strconv.FormatUint(broken, 10)) {
			t.Fatalf("break --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		hr := p.wait(t, 30*time.Second+3*b.ttl)
		if hr.code != lockctl.ExitLockLost {
			t.Fatalf("broken holder's lockctl run: exit %d; want %d\n%s", hr.code, lockctl.ExitLockLost, hr.stderr)
		}
		if got := readLines(t, mark); len(got) != 1 || got[0] != "TERM" {
			t.Fatalf("the broken holder's command got %q; want one TERM", got)
		}

		next := runLockctl(t, time.Minute, "run", "--backend", url, "--wait", "50s", key, "--", "sh", "-c", `echo "$DLOCK_TOKEN"`)
		if next.code != 0 {
			t.Fatalf("next holder: exit %d\n%s", next.code, next.stderr)
		}
		if tok, _ := strconv.ParseUint(strings.TrimSpace(next.stdout), 10, 64); tok <= broken {
			t.Fatalf("next holder's token %d; want above the broken holder's %d", tok, broken)
		}
		r = runLockctl(t, time.Minute, "break", "--force", "--backend", url, key)
		if r.code != 0 || !strings.Contains(r.stdout, "was free") {
			t.Fatalf("break of a free key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
