package main_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// Two (here three) lockctl run processes on one key never overlap: their
// commands append start and end marks to one file, and the marks never
// interleave. The fencing tokens the commands see increase from one
// section to the next.
func TestRunExclusive(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		const procs, rounds = 3, 4
		key := uniqueKey(t)
		log := filepath.Join(t.TempDir(), "log")
		script := `echo "start $$ $DLOCK_TOKEN" >> "$LOG"; sleep 0.05; echo "end $$ $DLOCK_TOKEN" >> "$LOG"`
		var wg sync.WaitGroup
		errs := make(chan string, procs*rounds)
		for range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					cmd := command("run", "--backend", url, "--ttl", b.ttl.String(), key, "--", "sh", "-c", script)
					cmd.Env = append(cmd.Env, "LOG="+log)
					out, err := cmd.CombinedOutput()
					if err != nil {
						errs <- err.Error() + ": " + string(out)
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("lockctl run: %s", e)
		}
		lines := readLines(t, log)
		if len(lines) != 2*procs*rounds {
			t.Fatalf("%d marks; want %d:\n%s", len(lines), 2*procs*rounds, strings.Join(lines, "\n"))
		}
		var last uint64
		for i := 0; i < len(lines); i += 2 {
			start, end := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			if start[0] != "start" || end[0] != "end" || start[1] != end[1] {
				t.Fatalf("critical sections overlap at mark %d:\n%s", i, strings.Join(lines, "\n"))
			}
			token, err := strconv.ParseUint(start[2], 10, 64)
			if err != nil || token <= last {
				t.Fatalf("DLOCK_TOKEN %q after %d: want increasing tokens", start[2], last)
			}
			last = token
		}
	})
}

// --wait 0 on a held key exits at once with the "not acquired" status, as
// does a --wait that runs out; signals to lockctl reach the command.
func TestRunWaitZero(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		key := uniqueKey(t)
		ready := filepath.Join(t.TempDir(), "ready")
		holder := command("run", "--backend", url, "--ttl", b.ttl.String(), key, "--",
			"sh", "-c", `touch "$READY"; exec sleep 60`)
		holder.Env = append(holder.Env, "READY="+ready)
		hp := start(t, holder)
		hp.waitFile(t, ready, 30*time.Second)

		r := runLockctl(t, 30*time.Second, "run", "--backend", url, "--wait", "0", key, "--", "true")
		if r.code != lockctl.ExitNotAcquired {
			t.Fatalf("--wait 0 on a held key: exit %d; want %d\n%s", r.code, lockctl.ExitNotAcquired, r.stderr)
		}
		if !strings.Contains(r.stderr, "held by another owner") {
			t.Errorf("--wait 0 on a held key said %q", r.stderr)
		}
		r = runLockctl(t, 30*time.Second, "run", "--backend", url, "--wait", "300ms", key, "--", "true")
		if r.code != lockctl.ExitNotAcquired {
			t.Fatalf("--wait 300ms on a held key: exit %d; want %d\n%s", r.code, lockctl.ExitNotAcquired, r.stderr)
		}
		// -E (--conflict-exit-code) sets the status of such a skip, as
		// flock -E does: 0 lets cron count it a success. The command
		// does not run.
		ran := filepath.Join(t.TempDir(), "ran")
		r = runLockctl(t, 30*time.Second, "run", "--backend", url, "-n", "-E", "0", key, "--", "touch", ran)
		if r.code != 0 || !strings.Contains(r.stderr, "held by another owner") {
			t.Fatalf("-n -E 0 on a held key: exit %d; want 0 saying it is held\n%s", r.code, r.stderr)
		}
		r = runLockctl(t, 30*time.Second, "run", "--backend", url, "--wait", "300ms", "--conflict-exit-code", "3", key, "--", "touch", ran)
		if r.code != 3 {
			t.Fatalf("--wait 300ms --conflict-exit-code 3 on a held key: exit %d; want 3\n%s", r.code, r.stderr)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatal("the command ran without the lock")
		}

		// SIGTERM to lockctl is forwarded: sleep dies of it, and lockctl
		// exits as its command did, after releasing the lock.
		if err := holder.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		hr := hp.wait(t, 30*time.Second)
		if hr.code != 128+int(syscall.SIGTERM) {
			t.Fatalf("holder after SIGTERM: exit %d; want %d (the forwarded signal)\n%s", hr.code, 128+int(syscall.SIGTERM), hr.stderr)
		}
		r = runLockctl(t, 30*time.Second, "run", "--backend", url, "--wait", "0", "-E", "0", key, "--", "sh", "-c", "exit 7")
		if r.code != 7 {
			t.Fatalf("--wait 0 -E 0 after the holder ended: exit %d; want 7, the command's (released)\n%s", r.code, r.stderr)
		}
	})
}

// DLOCK_TOKEN increases between runs, and DLOCK_KEY is the key.
func TestRunToken(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		key := uniqueKey(t)
		var last uint64
		for i := range 3 {
			r := runLockctl(t, 30*time.Second, "run", "--backend", url, key, "--", "sh", "-c", `echo "$DLOCK_KEY"; echo "$DLOCK_TOKEN"`)
			if r.code != 0 {
				t.Fatalf("run %d: exit %d\n%s", i, r.code, r.stderr)
			}
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 2 || lines[0] != key {
				t.Fatalf("run %d printed %q; want the key then the token", i, r.stdout)
			}
			token, err := strconv.ParseUint(lines[1], 10, 64)
			if err != nil || token <= last {
				t.Fatalf("run %d: DLOCK_TOKEN=%q after %d; want a larger number", i, lines[1], last)
			}
			last = token
		}
	})
}

// A command that outlives its lock is signalled. lockctl is frozen
// (SIGSTOP) with the command running, so its renewals stop; the lease
// expires on the backend and a second lockctl takes the lock, with a
// larger token. When the first lockctl resumes, it finds its lease over:
// the command gets SIGTERM and lockctl exits with the "lock lost" status.
func TestRunLockLost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		key := uniqueKey(t)
		dir := t.TempDir()
		ready, mark, tokenFile := filepath.Join(dir, "ready"), filepath.Join(dir, "mark"), filepath.Join(dir, "token")
		first := command("run", "--backend", url, "--ttl", b.ttl.String(), "--grace", "5s", key, "--", "sh", "-c",
			`trap 'echo TERM >> "$MARK"; exit 0' TERM; echo "$DLOCK_TOKEN" > "$TOKEN"; touch "$READY"; while :; do sleep 0.02; done`)
		first.Env = append(first.Env, "READY="+ready, "MARK="+mark, "TOKEN="+tokenFile)
		fp := start(t, first)
		fp.waitFile(t, ready, 30*time.Second)
		if err := first.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}

		second := runLockctl(t, time.Minute, "run", "--backend", url, "--wait", "50s", key, "--", "sh", "-c", `echo "$DLOCK_TOKEN"`)
		if second.code != 0 {
			t.Fatalf("second lockctl while the first is frozen: exit %d\n%s", second.code, second.stderr)
		}
		if _, err := os.Stat(mark); err == nil {
			t.Fatal("the command was signalled while lockctl was frozen")
		}
		if err := first.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		r := fp.wait(t, 30*time.Second)
		if r.code != lockctl.ExitLockLost {
			t.Fatalf("first lockctl after its lease expired: exit %d; want %d\n%s", r.code, lockctl.ExitLockLost, r.stderr)
		}
		if got := readLines(t, mark); len(got) != 1 || got[0] != "TERM" {
			t.Fatalf("the command's marks %q; want one TERM", got)
		}
		t1, _ := strconv.ParseUint(strings.TrimSpace(readLines(t, tokenFile)[0]), 10, 64)
		t2, _ := strconv.ParseUint(strings.TrimSpace(second.stdout), 10, 64)
		if t1 == 0 || t2 <= t1 {
			t.Fatalf("tokens: first holder %d, second %d; want the second larger", t1, t2)
		}
	})
}

// With file://, removing the state file of a held key breaks the lock: the
// command is signalled (SIGKILL at once with --on-lost kill).
func TestRunStateFileRemoved(t *testing.T) {
	lockDir := t.TempDir()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	cmd := command("run", "--backend", "file://"+lockDir, "--ttl", "1s", "--on-lost", "kill", "k", "--",
		"sh", "-c", `touch "$READY"; exec sleep 60`)
	cmd.Env = append(cmd.Env, "READY="+ready)
	p := start(t, cmd)
	p.waitFile(t, ready, 30*time.Second)
	if err := os.Remove(filepath.Join(lockDir, "k-k.lock")); err != nil {
		t.Fatal(err)
	}
	r := p.wait(t, 30*time.Second)
	if r.code != lockctl.ExitLockLost {
		t.Fatalf("exit %d; want %d\n%s", r.code, lockctl.ExitLockLost, r.stderr)
	}
	if !strings.Contains(r.stderr, "SIGKILL") || !strings.Contains(r.stderr, "command status 137") {
		t.Fatalf("stderr %q; want the command killed with SIGKILL", r.stderr)
	}
}

// lockctl exits with the command's status, and with 126/127 when it
// cannot start it.
func TestRunExitStatus(t *testing.T) {
	url := "file://" + t.TempDir()
	notExec := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		argv []string
		want int
	}{
		{[]string{"true"}, 0},
		{[]string{"sh", "-c", "exit 7"}, 7},
		{[]string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{[]string{"no-such-command-dlock"}, lockctl.ExitNotFound},
		{[]string{notExec}, lockctl.ExitCannotExec},
	} {
		r := runLockctl(t, 30*time.Second, append([]string{"run", "--backend", url, "k", "--"}, c.argv...)...)
		if r.code != c.want {
			t.Errorf("lockctl run k -- %v: exit %d; want %d\n%s", c.argv, r.code, c.want, r.stderr)
		}
	}
	// The lock was released every time.
	if r := runLockctl(t, 30*time.Second, "run", "--backend", url, "--wait", "0", "k", "--", "true"); r.code != 0 {
		t.Fatalf("lock still held after the runs: exit %d\n%s", r.code, r.stderr)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// lockctl run --permits 2: of four processes started at once, never more
// than two run their command at a time, and two do; each command is told
// its permit's key and a token that increases per permit. A process that
// disagrees on the number of permits is refused with the usage status.
func TestRunPermits(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend, url string) {
		const procs, permits = 4, 2
		key := uniqueKey(t)
		dir := t.TempDir()
		inside := filepath.Join(dir, "inside")
		if err := os.Mkdir(inside, 0o755); err != nil {
			t.Fatal(err)
		}
		log := filepath.Join(dir, "log")
		// Each command marks itself inside, counts who is inside, stays a
		// moment, and leaves: the count never exceeds the permits if the
		// semaphore holds.
		script := `touch "$IN/$$"; n=$(ls "$IN" | wc -l); echo "$n $DLOCK_PERMIT_KEY $DLOCK_TOKEN" >> "$LOG"; sleep 1; rm "$IN/$$"`
		var wg sync.WaitGroup
		errs := make(chan string, procs)
		for range procs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := command("run", "--backend", url, "--ttl", b.ttl.String(), "--permits", strconv.Itoa(permits), key, "--", "sh", "-c", script)
				cmd.Env = append(cmd.Env, "LOG="+log, "IN="+inside)
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- err.Error() + ": " + string(out)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatalf("lockctl run --permits: %s", e)
		}
		lines := readLines(t, log)
		if len(lines) != procs {
			t.Fatalf("%d commands ran; want %d:\n%s", len(lines), procs, strings.Join(lines, "\n"))
		}
		most := 0
		last := map[string]uint64{}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 3 || !strings.HasPrefix(f[1], key+"#permit/") {
				t.Fatalf("command printed %q; want a count, the permit key and a token", l)
			}
			n, _ := strconv.Atoi(f[0])
			most = max(most, n)
			token, err := strconv.ParseUint(f[2], 10, 64)
			if err != nil || token <= last[f[1]] {
				t.Fatalf("DLOCK_TOKEN %q for %s after %d: want increasing tokens per permit", f[2], f[1], last[f[1]])
			}
			last[f[1]] = token
		}
		if most > permits {
			t.Fatalf("%d commands ran at once with %d permits:\n%s", most, permits, strings.Join(lines, "\n"))
		}
		if most < permits {
			t.Fatalf("never more than %d command at once with %d permits and %d processes:\n%s", most, permits, procs, strings.Join(lines, "\n"))
		}

		// A holder with 2 permits; a lockctl with 3 is refused.
		ready := filepath.Join(dir, "ready")
		holder := command("run", "--backend", url, "--ttl", b.ttl.String(), "--permits", "2", key, "--",
			"sh", "-c", `touch "$READY"; exec sleep 60`)
		holder.Env = append(holder.Env, "READY="+ready)
		hp := start(t, holder)
		hp.waitFile(t, ready, 30*time.Second)
		r := runLockctl(t, 30*time.Second, "run", "--backend", url, "--permits", "3", key, "--", "true")
		if r.code != lockctl.ExitUsage || !strings.Contains(r.stderr, "permits") {
			t.Fatalf("--permits 3 beside a holder with 2: exit %d, %q; want %d", r.code, r.stderr, lockctl.ExitUsage)
		}
		_ = holder.Process.Signal(syscall.SIGTERM)
		hp.wait(t, 30*time.Second)
	})
}
