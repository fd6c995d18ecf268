package file_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
)

// The tests in this file run the test binary again as child processes
// (TestMain dispatches on childEnv), so that locks are taken by separate OS
// processes, as in production.

const childEnv = "DLOCK_FILE_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	os.Exit(m.Run())
}

// child runs one role in a child process and returns its exit code.
func child(role string) int {
	dir, key := os.Getenv("LOCK_DIR"), os.Getenv("LOCK_KEY")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if role == "recorder" {
		// Wait for the go file, so that every process calls at once.
		for {
			if _, err := os.Stat(os.Getenv("GO_FILE")); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		v, err := file.RecordIn(ctx, dir, key, os.Getenv("VALUE"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println(v)
		return 0
	}
	l, err := file.New(dir, dlock.WithTTL(500*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer l.Close()
	m, err := l.NewMutex(key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	switch role {
	case "worker":
		rounds, _ := strconv.Atoi(os.Getenv("ROUNDS"))
		for i := 0; i < rounds; i++ {
			if err := m.Lock(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := criticalSection(os.Getenv("SHARED"), m.Token()); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := m.Unlock(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	case "waiter":
		fmt.Println("waiting")
		if err := m.Lock(ctx); err != nil { // killed while it waits
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "crasher":
		if err := m.Lock(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("locked %d\n", m.Token())
		select {} // until killed
	}
	return 2
}

// criticalSection appends a start mark, increments a counter file with a
// pause between read and write (a lost update shows if two overlap), and
// appends an end mark.
func criticalSection(shared string, token dlock.Token) error {
	pid := os.Getpid()
	if err := appendLine(shared+".log", fmt.Sprintf("start %d %d", pid, token)); err != nil {
		return err
	}
	b, err := os.ReadFile(shared)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	time.Sleep(time.Millisecond)
	if err := os.WriteFile(shared, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		return err
	}
	return appendLine(shared+".log", fmt.Sprintf("end %d %d", pid, token))
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func childCmd(t *testing.T, role, dir, key string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "LOCK_DIR="+dir, "LOCK_KEY="+key)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Processes exclude each other: their critical sections never overlap, no
// update of the shared counter is lost, and tokens increase in the order
// the sections ran.
func TestProcessesExclude(t *testing.T) {
	const procs, rounds = 3, 15
	dir := t.TempDir()
	shared := filepath.Join(t.TempDir(), "counter")
	var cmds []*exec.Cmd
	for i := 0; i < procs; i++ {
		cmd := childCmd(t, "worker", dir, "shared/key", "SHARED="+shared, "ROUNDS="+strconv.Itoa(rounds))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker: %v", err)
		}
	}
	b, err := os.ReadFile(shared)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(procs*rounds) {
		t.Errorf("counter = %s; want %d (lost updates: sections overlapped)", got, procs*rounds)
	}
	f, err := os.Open(shared + ".log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		open      string // "pid token" of the section in progress
		lastToken uint64
		sections  int
		pids      = map[string]bool{}
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mark, who, _ := strings.Cut(sc.Text(), " ")
		switch mark {
		case "start":
			if open != "" {
				t.Fatalf("section %q started while %q was inside", who, open)
			}
			open = who
			_, tok, _ := strings.Cut(who, " ")
			token, _ := strconv.ParseUint(tok, 10, 64)
			if token <= lastToken {
				t.Fatalf("token %d after %d: not increasing", token, lastToken)
			}
			lastToken = token
			pid, _, _ := strings.Cut(who, " ")
			pids[pid] = true
		case "end":
			if open != who {
				t.Fatalf("section %q ended while %q was inside", who, open)
			}
			open = ""
			sections++
		}
	}
	if sections != procs*rounds || len(pids) != procs {
		t.Fatalf("%d sections by %d processes; want %d by %d", sections, len(pids), procs*rounds, procs)
	}
}

// A process killed while holding a lock blocks the key only until its
// lease runs out; the next holder gets a greater token.
func TestCrashedHolderExpires(t *testing.T) {
	dir := t.TempDir()
	const key = "crash"
	cmd := childCmd(t, "crasher", dir, key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	crashedToken, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(line, "locked ")), 10, 64)
	if err != nil {
		t.Fatalf("child said %q", line)
	}

	l, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex(key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the child holds the lock: %v; want ErrNotAcquired", err)
	}
	// The child renews its lease while alive: wait more than a TTL.
	time.Sleep(time.Second)
	if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the child renews: %v; want ErrNotAcquired", err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock after the holder was killed: %v", err)
	}
	t.Logf("taken over %v after the kill", time.Since(killed))
	if uint64(m.Token()) <= crashedToken {
		t.Fatalf("token %d after the crash; want more than %d", m.Token(), crashedToken)
	}
	_ = m.Unlock(ctx)
}

// A process killed while it waits in line leaves the line: its ticket
// goes with it, and the Lock behind it gets the key at the release, not
// after a TTL of the line standing still (a minute here, longer than the
// test's deadline).
func TestKilledWaiterLeavesLine(t *testing.T) {
	dir := t.TempDir()
	const key = "line"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ms := mutexes(t, dir, key, 2, dlock.WithTTL(time.Minute)) // holder, the Lock behind the child
	holder, next := ms[0], ms[1]
	inspector, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer inspector.Close()
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := childCmd(t, "waiter", dir, key)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("child: %v", err)
	}
	waitWaiters(t, holder, inspector, 1) // the child is in line
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitWaiters(t, holder, inspector, 0) // its ticket went with it
	got := make(chan error, 1)
	go func() { got <- next.Lock(ctx) }()
	waitWaiters(t, holder, inspector, 1)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock behind a killed waiter: %v", err)
	}
	_ = next.Unlock(ctx)
}

// Processes racing to record different values of one key all get the
// same one.
func TestRecordProcesses(t *testing.T) {
	const procs = 4
	dir := t.TempDir()
	goFile := filepath.Join(t.TempDir(), "go")
	for round := 0; round < 3; round++ {
		key := "sem/" + strconv.Itoa(round)
		var cmds []*exec.Cmd
		var outs []*strings.Builder
		for i := 0; i < procs; i++ {
			cmd := childCmd(t, "recorder", dir, key, "GO_FILE="+goFile+strconv.Itoa(round), "VALUE=permits="+strconv.Itoa(i+1))
			out := &strings.Builder{}
			cmd.Stdout = out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds, outs = append(cmds, cmd), append(outs, out)
		}
		time.Sleep(200 * time.Millisecond) // let the children start and wait
		if err := os.WriteFile(goFile+strconv.Itoa(round), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range cmds {
			if err := cmd.Wait(); err != nil {
				t.Fatalf("recorder: %v", err)
			}
		}
		first := strings.TrimSpace(outs[0].String())
		if !strings.HasPrefix(first, "permits=") {
			t.Fatalf("recorder said %q", first)
		}
		for _, out := range outs {
			if got := strings.TrimSpace(out.String()); got != first {
				t.Fatalf("round %d: processes got %q and %q; want one value", round, first, got)
			}
		}
	}
}

// mutexes returns n Mutexes on key, each of a Locker of its own on dir
// (its own descriptors and inotify instance, as n processes would have).
func mutexes(t *testing.T, dir, key string, n int, opts ...dlock.Option) []*dlock.Mutex {
	t.Helper()
	ms := make([]*dlock.Mutex, n)
	for i := range ms {
		l, err := file.New(dir, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		if ms[i], err = l.NewMutex(key); err != nil {
			t.Fatal(err)
		}
	}
	return ms
}

// waitWaiters waits until Inspect reports n Locks waiting for key.
func waitWaiters(t *testing.T, m *dlock.Mutex, l *dlock.Locker, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := l.Inspect(context.Background(), m.Key())
		if err != nil {
			t.Fatal(err)
		}
		if info.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect: Waiters %d, want %d", info.Waiters, n)
		}
		time.Sleep(time.Millisecond)
	}
}
