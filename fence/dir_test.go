//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || solaris

package fence_test

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// The cross-process tests run the test binary again as child processes
// (TestMain dispatches on dirChildEnv), so that fences are taken by
// separate OS processes, as in production.

const dirChildEnv = "DLOCK_FENCE_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(dirChildEnv); role != "" {
		os.Exit(dirChild(role))
	}
	os.Exit(m.Run())
}

// Exit codes of a child's Do.
const (
	exitAccepted = 0
	exitFailed   = 1
	exitStale    = 3
)

func dirChild(role string) int {
	d, err := fence.OpenDir(os.Getenv("FENCE_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitFailed
	}
	resource := os.Getenv("RESOURCE")
	switch role {
	case "do", "hold":
		tok, _ := strconv.ParseUint(os.Getenv("TOKEN"), 10, 64)
		err := d.Do(resource, dlock.Token(tok), func() error {
			fmt.Println("in")
			if role == "hold" {
				time.Sleep(time.Hour) // until killed (select{} would be a deadlock to the runtime)
			}
			return nil
		})
		var se *fence.StaleError
		if errors.As(err, &se) {
			fmt.Printf("stale %d %d\n", se.Token, se.Highest)
			return exitStale
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return exitFailed
		}
		return exitAccepted
	case "worker":
		id, _ := strconv.Atoi(os.Getenv("ID"))
		procs, _ := strconv.Atoi(os.Getenv("PROCS"))
		rounds, _ := strconv.Atoi(os.Getenv("ROUNDS"))
		shared := os.Getenv("SHARED")
		accepted := 0
		for i := 0; i < rounds; i++ {
			tok := dlock.Token(i*procs + id + 1)
			err := d.Do(resource, tok, func() error { return fencedIncrement(shared, tok) })
			if errors.Is(err, fence.ErrStale) {
				continue
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return exitFailed
			}
			accepted++
		}
		fmt.Println(accepted)
		return exitAccepted
	}
	return exitFailed
}

// fencedIncrement adds one to the counter in file shared, with a pause
// between its read and its write (two overlapping ones lose an update),
// and appends token to shared.log.
func fencedIncrement(shared string, token dlock.Token) error {
	b, err := os.ReadFile(shared)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	time.Sleep(200 * time.Microsecond)
	if err := os.WriteFile(shared, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(shared+".log", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, token); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func dirChildCmd(t *testing.T, role, dir, resource string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dirChildEnv+"="+role, "FENCE_DIR="+dir, "RESOURCE="+resource)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// runDo runs Do with token in a child process and returns its exit code
// and output.
func runDo(t *testing.T, dir, resource string, token dlock.Token) (int, string) {
	t.Helper()
	cmd := dirChildCmd(t, "do", dir, resource, "TOKEN="+strconv.FormatUint(uint64(token), 10))
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// A token accepted in one process makes a lower one stale in another.
func TestDirStaleAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	const res = "stock/apple"
	if code, out := runDo(t, dir, res, 10); code != exitAccepted || out != "in\n" {
		t.Fatalf("first process, token 10: exit %d, %q; want accepted", code, out)
	}
	if code, out := runDo(t, dir, res, 5); code != exitStale || out != "stale 5 10\n" {
		t.Fatalf("second process, token 5 after 10: exit %d, %q; want stale 5 10, op not run", code, out)
	}
	if code, _ := runDo(t, dir, res, 10); code != exitAccepted {
		t.Fatalf("third process, token 10 again: exit %d; want accepted", code)
	}
	d, err := fence.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.Highest(res); got != 10 || err != nil {
		t.Fatalf("Highest = %d, %v; want 10", got, err)
	}
	var se *fence.StaleError
	if err := d.Check(res, 9); !errors.As(err, &se) || se.Highest != 10 {
		t.Fatalf("this process, token 9: %v; want StaleError with highest 10", err)
	}
	if code, _ := runDo(t, dir, res, 11); code != exitAccepted {
		t.Fatalf("token 11: exit %d; want accepted", code)
	}
	if err := d.Check(res, 10); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("this process, token 10 after another's 11: %v; want ErrStale", err)
	}
}

// Processes offering interleaved tokens take turns: no update of a shared
// counter is lost (ops never overlap), the accepted tokens were applied in
// increasing order, and the fence ends at the last of them.
func TestDirProcessesTakeTurns(t *testing.T) {
	const procs, rounds = 4, 40
	dir := t.TempDir()
	shared := filepath.Join(t.TempDir(), "counter")
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := 0; i < procs; i++ {
		cmd := dirChildCmd(t, "worker", dir, "counter", "SHARED="+shared,
			"ID="+strconv.Itoa(i), "PROCS="+strconv.Itoa(procs), "ROUNDS="+strconv.Itoa(rounds))
		out := &strings.Builder{}
		cmd.Stdout = out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	accepted := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("worker: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(outs[i].String()))
		if err != nil {
			t.Fatalf("worker said %q", outs[i])
		}
		accepted += n
	}
	b, err := os.ReadFile(shared)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(accepted) {
		t.Errorf("counter = %s after %d accepted ops: ops overlapped", got, accepted)
	}
	f, err := os.Open(shared + ".log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tok, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if tok < last {
			t.Fatalf("token %d applied after %d", tok, last)
		}
		last = tok
	}
	d, err := fence.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := d.Highest("counter"); uint64(got) != last || err != nil {
		t.Errorf("Highest = %d, %v; want the last applied token, %d", got, err, last)
	}
	t.Logf("%d of %d ops accepted", accepted, procs*rounds)
	if accepted == procs*rounds {
		t.Log("no token was refused: the processes did not interleave")
	}
}

// Do waits while another process runs its op on the resource, and goes on
// as soon as that process dies: the kernel releases its flock.
func TestDirWaitsForOtherProcess(t *testing.T) {
	dir := t.TempDir()
	const res = "r"
	cmd := dirChildCmd(t, "hold", dir, res, "TOKEN=3")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "in\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	d, err := fence.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Do(res, 4, func() error { return nil }) }()
	select {
	case err := <-done:
		t.Fatalf("Do returned %v while another process was inside the fence", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Do after the other process died: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Do still waiting 10s after the other process died")
	}
	if got, _ := d.Highest(res); got != 4 {
		t.Errorf("Highest = %d, want 4", got)
	}
}

func openTestDir(t *testing.T) *fence.Dir {
	t.Helper()
	d, err := fence.OpenDir(filepath.Join(t.TempDir(), "fences"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDirRule(t *testing.T) {
	d := openTestDir(t)
	ran := 0
	op := func() error { ran++; return nil }
	if err := d.Do("a", 5, op); err != nil {
		t.Fatalf("first token refused: %v", err)
	}
	if err := d.Do("a", 5, op); err != nil {
		t.Fatalf("equal token refused: %v", err)
	}
	err := d.Do("a", 4, op)
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Token != 4 || se.Highest != 5 || se.Resource != "a" {
		t.Fatalf("lower token: got %v, want StaleError{a, 4, 5}", err)
	}
	if ran != 2 {
		t.Fatalf("op ran %d times, want 2 (never for the stale token)", ran)
	}
	if err := d.Do("b", 1, op); err != nil {
		t.Fatalf("token 1 on another resource refused: %v", err)
	}
	for res, want := range map[string]dlock.Token{"a": 5, "b": 1, "never": 0} {
		if got, err := d.Highest(res); got != want || err != nil {
			t.Errorf("Highest(%s) = %d, %v; want %d", res, got, err, want)
		}
	}
	if err := d.Do("a", 1<<63+1, op); err != nil {
		t.Fatalf("token above 2^63 refused: %v", err)
	}
	if err := d.Check("a", 1<<63); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 2^63 after 2^63+1: got %v, want ErrStale", err)
	}
	// A second Dir on the same directory sees the same fences.
	d2, err := fence.OpenDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := d2.Check("a", 5); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("another Dir on the directory: got %v, want ErrStale", err)
	}
}

func TestDirBadInput(t *testing.T) {
	d := openTestDir(t)
	ran := false
	op := func() error { ran = true; return nil }
	if err := d.Do("a", 0, op); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("token 0: got %v, want ErrNoToken", err)
	}
	if err := d.Do("", 1, op); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("empty resource: got %v, want ErrInvalid", err)
	}
	if _, err := d.Highest(""); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("Highest of empty resource: got %v, want ErrInvalid", err)
	}
	var zero fence.Dir
	if err := zero.Do("a", 1, op); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("zero Dir: got %v, want ErrInvalid", err)
	}
	if ran {
		t.Error("op ran on bad input")
	}
	if _, err := fence.OpenDir(""); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("OpenDir(\"\"): got %v, want ErrInvalid", err)
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fence.OpenDir(notDir); err == nil {
		t.Error("OpenDir of a regular file succeeded")
	}
	entries, _ := os.ReadDir(d.Path())
	if len(entries) != 0 {
		t.Errorf("bad input created %d files", len(entries))
	}
}

func TestDirOpErrorKeepsFence(t *testing.T) {
	d := openTestDir(t)
	boom := errors.New("boom")
	if err := d.Do("a", 7, func() error { return boom }); err != boom {
		t.Fatalf("got %v, want op's error", err)
	}
	if got, _ := d.Highest("a"); got != 7 {
		t.Errorf("Highest = %d after a failed op, want 7: the token was seen", got)
	}
}

// Any string is a resource: each gets a file of its own, inside the
// directory, whatever its slashes, dots, NULs or length.
func TestDirResourceNames(t *testing.T) {
	parent := t.TempDir()
	d, err := fence.OpenDir(filepath.Join(parent, "fences"))
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x/", 300)
	names := []string{"a", "A", "a/b", "a%2Fb", "a_2Fb", "/", "..", ".", "../escape", "../../etc/passwd",
		"a\x00b", "a\nb", "é", " ", "-", long, long + "y", strings.Repeat("%", 150)}
	for i, name := range names {
		if err := d.Do(name, dlock.Token(100+i), func() error { return nil }); err != nil {
			t.Fatalf("Do(%q): %v", name, err)
		}
	}
	for i, name := range names {
		if got, err := d.Highest(name); got != dlock.Token(100+i) || err != nil {
			t.Errorf("Highest(%q) = %d, %v; want %d: resources share a fence", name, got, err, 100+i)
		}
	}
	entries, err := os.ReadDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(names) {
		t.Errorf("%d files for %d resources", len(entries), len(names))
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") || len(e.Name()) > 255 {
			t.Errorf("fence file %q", e.Name())
		}
	}
	outside, _ := os.ReadDir(parent)
	if len(outside) != 1 {
		t.Errorf("files outside the fence directory: %v", outside)
	}
}

// A fence file that does not read back as the resource's fence is an
// error, never a fence at 0 that would accept any token.
func TestDirDamagedFile(t *testing.T) {
	d := openTestDir(t)
	if err := d.Check("r", 50); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(d.Path())
	if len(entries) != 1 {
		t.Fatalf("%d files", len(entries))
	}
	path := filepath.Join(d.Path(), entries[0].Name())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := fence.EncodeToken(50) + "\nr"; string(b) != want {
		t.Fatalf("fence file holds %q, want %q", b, want)
	}
	for _, bad := range []string{"garbage", fence.EncodeToken(50) + "\nq", "5\nr", "x" + fence.EncodeToken(50)[1:] + "\nr"} {
		if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.Check("r", 1); err == nil || errors.Is(err, fence.ErrStale) {
			t.Errorf("file %q: Check = %v; want an error about the file", bad, err)
		}
		if _, err := d.Highest("r"); err == nil {
			t.Errorf("file %q: Highest read it", bad)
		}
	}
}

// Many goroutines, through two Dirs on one directory (so through the
// flock as well as within a Dir), offer random tokens on a few resources.
// The race detector cannot see the order a flock makes, so the ops keep
// their state in atomics and count themselves inside the fence instead.
func TestDirConcurrent(t *testing.T) {
	const keys, goroutines, perG = 3, 16, 60
	d1 := openTestDir(t)
	d2, err := fence.OpenDir(d1.Path())
	if err != nil {
		t.Fatal(err)
	}
	type state struct {
		last     atomic.Uint64
		accepted atomic.Int64
		inside   atomic.Int32
	}
	st := make([]*state, keys)
	for i := range st {
		st[i] = &state{}
	}
	var maxOffered [keys]atomic.Uint64
	var refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		d := d1
		if g%2 == 1 {
			d = d2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for i := 0; i < perG; i++ {
				k := r.IntN(keys)
				tok := dlock.Token(1 + r.IntN(1000))
				for {
					old := maxOffered[k].Load()
					if uint64(tok) <= old || maxOffered[k].CompareAndSwap(old, uint64(tok)) {
						break
					}
				}
				s := st[k]
				err := d.Do(fmt.Sprint("key/", k), tok, func() error {
					if n := s.inside.Add(1); n != 1 {
						return fmt.Errorf("%d ops inside the fence of one resource", n)
					}
					defer s.inside.Add(-1)
					if last := s.last.Load(); uint64(tok) < last {
						return fmt.Errorf("accepted token %d after %d", tok, last)
					}
					s.last.Store(uint64(tok))
					s.accepted.Add(1)
					return nil
				})
				if errors.Is(err, fence.ErrStale) {
					refused.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := int64(0)
	for k, s := range st {
		total += s.accepted.Load()
		got, err := d1.Highest(fmt.Sprint("key/", k))
		if want := dlock.Token(maxOffered[k].Load()); got != want || err != nil {
			t.Errorf("key %d: Highest = %d, %v; want the largest token offered, %d", k, got, err, want)
		}
	}
	if total+refused.Load() != goroutines*perG {
		t.Errorf("accepted %d + refused %d != %d operations", total, refused.Load(), goroutines*perG)
	}
	if refused.Load() == 0 {
		t.Error("no token was refused: the test exercised nothing")
	}
}

// One accepted operation per iteration, each with a new token: an open,
// flock, read, pwrite and fsync of the fence file.
func BenchmarkDirDo(b *testing.B) {
	d, err := fence.OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := d.Do("k", dlock.Token(i+1), func() error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}
