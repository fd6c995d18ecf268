package launcher

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/dlock-go/dlock/internal/topology"
)

// procState is what /proc says about a recorded process.
type procState int

const (
	procGone    procState = iota // no such process, a zombie, or a recycled PID
	procRunning                  // alive and scheduled
	procPaused                   // stopped by SIGSTOP
)

func (s procState) String() string {
	switch s {
	case procRunning:
		return "running"
	case procPaused:
		return "paused"
	}
	return "exited"
}

// procStat returns the state letter and start time (clock ticks after boot,
// field 22 of /proc/PID/stat) of pid.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may itself contain
	// spaces and parentheses: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil || len(f[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return f[0][0], start, nil
}

// stateOf says whether the process recorded as (pid, start) still exists. A
// PID whose start time differs belongs to another process: it is gone.
func stateOf(pid int, start uint64) procState {
	if pid <= 0 {
		return procGone
	}
	st, s, err := procStat(pid)
	if err != nil || s != start {
		return procGone
	}
	switch st {
	case 'Z', 'X', 'x':
		return procGone
	case 'T', 't':
		return procPaused
	}
	return procRunning
}

// errGone is returned when a recorded process no longer exists.
var errGone = errors.New("process is not running")

// signal sends sig to the recorded process only if it is still the process
// that was started (same PID and start time).
func signal(pid int, start uint64, sig syscall.Signal) error {
	if stateOf(pid, start) == procGone {
		return errGone
	}
	if err := syscall.Kill(pid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return errGone
		}
		return fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
	}
	return nil
}

// waitState polls until the recorded process reaches want (procGone or
// procPaused), or the timeout passes.
func waitState(pid int, start uint64, want procState, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		s := stateOf(pid, start)
		if s == want || (want == procPaused && s == procGone) {
			return s == want
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spawn starts path with args in its own session (so it outlives the
// launcher and ignores the terminal's signals), output to log, and returns
// its PID and start time. The child is reaped in the background if it exits
// while this process still runs.
func spawn(path string, args []string, dir string, log *os.File, cred *syscall.Credential) (int, uint64, error) {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	// The child cannot be reaped before Wait, so its PID is still its own.
	_, start, err := procStat(cmd.Process.Pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return 0, 0, err
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, start, nil
}

// checkPorts fails, naming the port, if any port of n is taken. Consul's
// gossip and DNS ports are UDP as well as TCP.
func checkPorts(n topology.Node) error {
	for _, p := range n.Ports {
		addr := net.JoinHostPort(topology.Host, strconv.Itoa(p.Number))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("port %d (%s port of %s) is already in use by another process: %w", p.Number, p.Name, n.Name, err)
		}
		ln.Close()
		switch p.Name {
		case topology.SerfLAN, topology.SerfWAN, topology.DNS:
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return fmt.Errorf("UDP port %d (%s port of %s) is already in use by another process: %w", p.Number, p.Name, n.Name, err)
			}
			pc.Close()
		}
	}
	return nil
}
