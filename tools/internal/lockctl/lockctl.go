// Package lockctl is the lockctl command: run a command under a
// distributed lock, show the race a lock prevents, compare backends, and
// operate locks (status, break, doctor).
// cmd/lockctl is a thin main around Main; the logic lives here so that it
// can be tested without building the binary.
package lockctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// IO is what a lockctl invocation talks to: the process's standard streams
// and environment in production, buffers and a map in tests.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment (DLOCK_URL).
	Getenv func(string) string
	// Environ is the environment handed to commands lockctl starts.
	Environ []string
}

// OSIO is the IO of the running process.
func OSIO() IO {
	return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Environ: os.Environ()}
}

const usage = `lockctl: distributed locks from the command line.

Usage:
  lockctl run [flags] KEY -- COMMAND [ARGS...]   run COMMAND while holding the lock KEY
                                                 (--permits N: one of N permits, at most N at a time)
  lockctl elect [flags] NAME -- COMMAND [ARGS...] run COMMAND while leading the election NAME
  lockctl demo [flags]                           show the oversell race, without and with a lock
  lockctl bench [flags] --backend URL ...        compare backends: throughput, latency, handoff
  lockctl status [flags] KEY...                  who holds each KEY: token, lease left, owner, waiters
  lockctl break --force [flags] KEY              remove whatever holds KEY (its holder is told at its next renewal)
                                                 (--permits N: clear a semaphore's record of N permits)
  lockctl doctor [flags] [URL]                   report the backend's settings that weaken dlock's promises
  lockctl move status|commit --from X --to Y [KEY...]  where a move between backends stands; commit it
  lockctl help [COMMAND]                         show help ("lockctl COMMAND --help" too)

Backends are URLs (?ttl=10s sets the default lease); built in:
%s
The default backend is $DLOCK_URL when set, else file://.

Exit status of lockctl run and elect: the command's own (128+N if it died of signal N),
or one of lockctl's own codes:
  64  usage error: bad flag, key, TTL or URL
  69  backend error: the backend could not be reached or failed
  75  not acquired: the lock is held elsewhere and --wait ran out (or was 0);
      lockctl run --conflict-exit-code N (-E N) exits N instead
  76  lock lost while the command ran (the command was signalled)
  126 the command could not be executed; 127 it was not found
lockctl demo and bench exit 0, or 64 (usage) or 69 (backend error).
lockctl status exits 0 when every KEY is free, 1 when one is held; break 0
when done; doctor 0 when nothing weakens a promise, 1 for warnings, 2 when
a setting breaks one; all of them 64 (usage) or 69 (backend error).
`

// Main runs lockctl with args (without the program name) and returns the
// exit status.
func Main(ctx context.Context, args []string, sys IO) int {
	if len(args) == 0 {
		fmt.Fprint(sys.Stderr, topUsage())
		return ExitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runMain(ctx, rest, sys)
	case "elect":
		return electMain(ctx, rest, sys)
	case "demo":
		return demoMain(ctx, rest, sys)
	case "bench":
		return benchMain(ctx, rest, sys)
	case "status":
		return statusMain(ctx, rest, sys)
	case "break":
		return breakMain(ctx, rest, sys)
	case "doctor":
		return doctorMain(ctx, rest, sys)
	case "move":
		return moveMain(ctx, rest, sys)
	case demoWorkerCmd:
		return demoWorkerMain(ctx, rest, sys)
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			fmt.Fprint(sys.Stdout, topUsage())
			return 0
		}
		if len(rest) == 1 {
			switch rest[0] {
			case "run", "elect", "demo", "bench", "status", "break", "doctor", "move":
				return Main(ctx, []string{rest[0], "--help"}, sys)
			}
		}
		return usageError(sys.Stderr, "help: unknown command %q (commands: run, elect, demo, bench, status, break, doctor, move)", strings.Join(rest, " "))
	default:
		return usageError(sys.Stderr, "unknown command %q (commands: run, elect, demo, bench, status, break, doctor, move; see lockctl --help)", cmd)
	}
}

func topUsage() string {
	return fmt.Sprintf(usage, schemeLines())
}
