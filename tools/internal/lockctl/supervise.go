package lockctl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
)

// holding is what supervise needs of a hold: a Mutex, or an Election's
// leadership (leadership, in elect.go).
type holding interface {
	Done() <-chan struct{}
	Token() dlock.Token
	Unlock(ctx context.Context) error
}

// supervise starts COMMAND under the held lock m, forwards signals to it,
// signals it when the lock is lost, releases the lock when it ends, and
// returns lockctl's exit status.
func supervise(m holding, cfg runConfig, sigs <-chan os.Signal, sys IO) int {
	cmd := command(m, cfg, sys)
	tty, foreground := foregroundTTY(sys.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,       // signals reach COMMAND's children too
		Pdeathsig: cfg.onLost, // if lockctl dies, so does the hold: stop COMMAND
	}
	if foreground {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = tty
	}
	// Pdeathsig follows the thread that forked, not the process: keep this
	// goroutine on its thread until COMMAND has ended.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		_, _ = unlock(m, sys)
		fmt.Fprintf(sys.Stderr, "lockctl: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return ExitNotFound
		}
		return ExitCannotExec
	}
	if foreground {
		defer reclaimTTY(tty)
	}
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	lostC := m.Done()
	var (
		lost bool
		kill <-chan time.Time
	)
	for {
		select {
		case s := <-sigs:
			signalGroup(pgid, s.(syscall.Signal))
			continue
		case <-lostC:
			lostC, lost = nil, true
			if e, ok := m.(interface{ Err() error }); ok && errors.Is(e.Err(), dlock.ErrMaxHoldReached) {
				fmt.Fprintf(sys.Stderr, "lockctl: %s %q reached its maximum hold of %v and was released; sending the command %v\n", cfg.noun(), cfg.key, cfg.maxHold, signalName(cfg.onLost))
			} else {
				fmt.Fprintf(sys.Stderr, "lockctl: %s %q lost while the command ran; sending it %v\n", cfg.noun(), cfg.key, signalName(cfg.onLost))
			}
			signalGroup(pgid, cfg.onLost)
			if cfg.onLost != syscall.SIGKILL {
				t := time.NewTimer(cfg.grace)
				defer t.Stop()
				kill = t.C
			}
			continue
		case <-kill:
			kill = nil
			fmt.Fprintf(sys.Stderr, "lockctl: the command outlived the %v grace; sending it SIGKILL\n", cfg.grace)
			signalGroup(pgid, syscall.SIGKILL)
			continue
		case <-exited:
		}
		break
	}
	status := exitStatus(cmd.ProcessState)
	if lost {
		_, _ = unlock(m, sys)
		fmt.Fprintf(sys.Stderr, "lockctl: %s %q was lost while the command ran (command status %d)\n", cfg.noun(), cfg.key, status)
		return ExitLockLost
	}
	if wasLost, err := unlock(m, sys); wasLost {
		fmt.Fprintf(sys.Stderr, "lockctl: %s %q was lost while the command ran (command status %d): %v\n", cfg.noun(), cfg.key, status, err)
		return ExitLockLost
	}
	if cfg.verbose {
		fmt.Fprintf(sys.Stderr, "lockctl: released %q; command status %d\n", cfg.key, status)
	}
	return status
}

// command builds COMMAND with DLOCK_KEY and DLOCK_TOKEN in its environment.
func command(m holding, cfg runConfig, sys IO) *exec.Cmd {
	cmd := exec.Command(cfg.argv[0], cfg.argv[1:]...)
	env := make([]string, 0, len(sys.Environ)+2)
	for _, kv := range sys.Environ {
		if !strings.HasPrefix(kv, "DLOCK_KEY=") && !strings.HasPrefix(kv, "DLOCK_TOKEN=") && !strings.HasPrefix(kv, "DLOCK_PERMIT_KEY=") && !strings.HasPrefix(kv, "DLOCK_LOCK_MODE=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "DLOCK_KEY="+cfg.key, "DLOCK_TOKEN="+strconv.FormatUint(uint64(m.Token()), 10))
	if cfg.permits > 0 {
		cmd.Env = append(cmd.Env, "DLOCK_PERMIT_KEY="+permitKey(m, cfg.key))
	}
	if cfg.readers > 0 {
		mode := "write"
		if cfg.read {
			mode = "read"
		}
		cmd.Env = append(cmd.Env, "DLOCK_LOCK_MODE="+mode)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = sys.Stdin, sys.Stdout, sys.Stderr
	// With streams that are not files (tests), do not wait forever for a
	// background grandchild that keeps a pipe open.
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// signalGroup sends sig to the process group pgid (COMMAND and its
// children), or to COMMAND alone if the group is gone.
func signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil {
		_ = syscall.Kill(pgid, sig)
	}
}

// exitStatus is COMMAND's exit code, or 128+N when signal N ended it.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return ExitBackend
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return s.String()
}
