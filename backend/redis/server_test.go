package redis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testenv"
)

// tempServer is a redis-server this test started, on a free loopback port
// in a temporary directory, so that it can be restarted or reconfigured
// without touching the shared test servers.
type tempServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	conf string // a config file, for a Sentinel
	args []string
	cmd  *exec.Cmd
}

// startTempServer starts redis-server without persistence, plus args. A
// missing redis-server skips the test, or fails it when the Redis backend
// is required (make test).
func startTempServer(t testing.TB, args ...string) *tempServer {
	t.Helper()
	s := newTempServer(t, args...)
	s.start()
	t.Cleanup(s.stop)
	return s
}

// startSentinel starts a Sentinel that monitors primary as "mymaster".
func startSentinel(t testing.TB, primary *tempServer) *tempServer {
	t.Helper()
	s := newTempServer(t, "--sentinel")
	s.conf = filepath.Join(s.dir, "sentinel.conf")
	conf := fmt.Sprintf("sentinel monitor mymaster 127.0.0.1 %d 1\n", primary.port)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func newTempServer(t testing.TB, args ...string) *tempServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.Required("DLOCK_REDIS_URL") {
			t.Fatalf("redis-server not found in PATH: %v", err)
		}
		t.Skipf("redis-server not found in PATH: %v", err)
	}
	return &tempServer{t: t, bin: bin, dir: t.TempDir(), port: freePort(t), args: args}
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *tempServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }
func (s *tempServer) url() string  { return "redis://" + s.addr() }

func (s *tempServer) start() {
	s.t.Helper()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(s.port), "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	args = append(args, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("starting redis-server: %v", err)
	}
	c := goredis.NewClient(&goredis.Options{Addr: s.addr(), MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.stop()
			s.t.Fatalf("redis-server on %s not ready: %v\n%s", s.addr(), err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop kills the server (as a crash would: nothing is saved) and waits
// for it to exit.
func (s *tempServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // if paused
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *tempServer) restart() {
	s.t.Helper()
	s.stop()
	s.start()
}

// client returns a plain client of the server, closed when the test ends.
func (s *tempServer) client() *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.addr()})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *tempServer) String() string { return fmt.Sprintf("redis-server %s", s.addr()) }

// pause stops the server process (SIGSTOP): it accepts connections and
// reads nothing until resume.
func (s *tempServer) pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatal(err)
	}
}

func (s *tempServer) resume() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		s.t.Fatal(err)
	}
}
