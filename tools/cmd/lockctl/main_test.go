package main_test

// These tests build lockctl and run it as a user would: separate processes,
// real signals, real backends. They cover file:// always, and every server
// backend whose endpoint is set (required under make test).

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// lockctlBin is the binary built by TestMain.
var lockctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lockctlBin = filepath.Join(dir, "lockctl")
	build := exec.Command("go", "build", "-o", lockctlBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building lockctl:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// backend is one backend the run tests cover.
type backend struct {
	name   string
	envVar string        // endpoint variable; "" for file://
	query  string        // URL parameters added for the tests
	ttl    time.Duration // a short lease the backend honours
}

// backends are the ones lockctl is tested against. The server ones need
// their endpoint (testenv: skipped locally when unset, required by make
// test).
var backends = []backend{
	{name: "file", ttl: time.Second},
	{name: "redis", envVar: "DLOCK_REDIS_URL", ttl: time.Second},
	{name: "etcd", envVar: "DLOCK_ETCD_URL", ttl: 2 * time.Second},
	{name: "redlock", envVar: "DLOCK_REDLOCK_URL", ttl: time.Second},
	{name: "zookeeper", envVar: "DLOCK_ZK_URL", query: "session_timeout=2s", ttl: 2 * time.Second},
	// Consul sessions last at least 10s; with no lock-delay a lock is free
	// as soon as its session ends.
	{name: "consul", envVar: "DLOCK_CONSUL_URL", query: "lockdelay=0s", ttl: 10 * time.Second},
	// A table of lockctl's own on the shared server.
	{name: "postgres", envVar: "DLOCK_POSTGRES_URL", query: "table=dlock_lockctl_test", ttl: time.Second},
}

// forEachBackend runs fn as a subtest per backend with its URL.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend, url string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			var url string
			if b.envVar == "" {
				url = "file://" + t.TempDir()
			} else {
				url = testenv.Endpoint(t, b.envVar)
			}
			if b.query != "" {
				sep := "?"
				if strings.Contains(url, "?") {
					sep = "&"
				}
				url += sep + b.query
			}
			fn(t, b, url)
		})
	}
}

// uniqueKey is a key no other test run uses (servers are shared).
func uniqueKey(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lockctl-test/" + hex.EncodeToString(b[:]) + "/" + t.Name()
}

// command prepares a lockctl command with a clean environment (no
// DLOCK_URL from the caller's shell).
func command(args ...string) *exec.Cmd {
	cmd := exec.Command(lockctlBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DLOCK_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// result is a finished lockctl run.
type result struct {
	code           int
	stdout, stderr string
}

// proc is a lockctl process started by a test.
type proc struct {
	cmd         *exec.Cmd
	out, errOut bytes.Buffer
	done        chan struct{} // closed when it has exited
	err         error         // cmd.Wait's result, once done
}

// start starts cmd with its output captured; it is killed at the end of
// the test if still running.
func start(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.out, &p.errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// runLockctl runs lockctl to completion, within a bound.
func runLockctl(t *testing.T, timeout time.Duration, args ...string) result {
	t.Helper()
	return start(t, command(args...)).wait(t, timeout)
}

// wait waits for p to exit, killing it after timeout.
func (p *proc) wait(t *testing.T, timeout time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%v did not finish within %v; stderr:\n%s", p.cmd.Args, timeout, p.errOut.String())
	}
	r := result{stdout: p.out.String(), stderr: p.errOut.String()}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
	case errors.As(p.err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%v: %v", p.cmd.Args, p.err)
	}
	return r
}

// waitFile waits until the command run by p has created path.
func (p *proc) waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%v exited (%v) before %s appeared; stderr:\n%s", p.cmd.Args, p.err, path, p.errOut.String())
		case <-deadline:
			t.Fatalf("%s did not appear within %v; stderr:\n%s", path, timeout, p.errOut.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
