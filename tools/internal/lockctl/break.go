package lockctl

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/dlock-go/dlock"
)

const breakHelp = `Usage: lockctl break --force [flags] KEY

Removes whatever holds KEY on the backend's server, for a lock whose
holder is stuck (hung, partitioned, or a lease far longer than wanted).

Breaking is not safe by itself: the broken holder may still be running and
acting on what the lock protects, and it learns of the break only at its
next renewal (its Done closes within its renewal interval; a lockctl run
under it signals its command and exits 76). Until then two holders may act.
What keeps the data safe is fencing: the next holder's token is higher than
the broken holder's, so a store that checks tokens (dlock's fence package,
DLOCK_TOKEN handed to lockctl run's command) refuses the broken holder's
late writes. Without --force, lockctl break refuses and changes nothing;
run lockctl status KEY first to see who holds it.

  lockctl status nightly-report
  lockctl break --force nightly-report

With --permits N, KEY is a semaphore (lockctl run --permits N KEY): break
clears the key's record that it has N permits, so that clients of another
number may use it (until then they are refused: a semaphore's number is
recorded by its first client). It breaks no hold, needs no --force, and is
refused (exit 75) while a permit is held: stop every client of the old
number first.

  lockctl break --permits 3 transcode

Exit status:
  0   the hold was removed (or KEY was already free: nothing removed);
      with --permits, the record was cleared (or there was none of N)
  64  usage error (bad flag, key or URL, or --force missing)
  69  backend error (unreachable, failing, or it cannot break locks)
  75  with --permits: a permit of KEY is held

The backend is --backend, else $DLOCK_URL, else file:// (one host, no server).
`

// breakRefusal is what lockctl break says without --force.
const breakRefusal = `lockctl: break: refusing without --force: the holder of %q may still be acting on what the lock protects,
  and keeps doing so until its next renewal finds the lock gone. Only fencing (the next holder's larger token)
  stops its late writes. Check the holder with "lockctl status %s", then run "lockctl break --force %s".
`

func breakMain(ctx context.Context, args []string, sys IO) int {
	fs := newFlags("break", breakHelp, sys)
	rawURL := fs.String("backend", "", "backend `URL` (default $DLOCK_URL, else file://)")
	force := fs.Bool("force", false, "really break the lock (see above)")
	permits := fs.Int("permits", 0, "clear the semaphore KEY's record of `N` permits instead (see above)")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return code
	}
	reset := permitsSet(fs)
	if reset && *permits < 1 {
		return usageError(sys.Stderr, "break: --permits %d: want at least 1", *permits)
	}
	keys := fs.Args()
	switch {
	case len(keys) == 0:
		return usageError(sys.Stderr, "break: missing KEY: lockctl break --force [flags] KEY")
	case len(keys) > 1:
		return usageError(sys.Stderr, "break: one KEY at a time (got %d; flags go before KEY)", len(keys))
	}
	key := keys[0]
	if !*force && !reset {
		fmt.Fprintf(sys.Stderr, breakRefusal, key, shellQuote(key), shellQuote(key))
		return ExitUsage
	}
	u := backendURL(*rawURL, sys)
	l, err := open(ctx, u)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	defer l.Close()
	bctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if reset {
		cleared, err := l.ResetSemaphore(bctx, key, *permits)
		if err != nil {
			return fail(sys.Stderr, err)
		}
		if cleared {
			fmt.Fprintf(sys.Stdout, "cleared %s's record of %d permits: its next client records its own number\n", oneLine(key), *permits)
		} else {
			fmt.Fprintf(sys.Stdout, "%s has no record of %d permits: nothing cleared\n", oneLine(key), *permits)
		}
		return 0
	}
	in, err := l.Break(bctx, key)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	writeBreak(sys.Stdout, in)
	return 0
}

// writeBreak reports what Break removed.
func writeBreak(w io.Writer, in dlock.Info) {
	if !in.Held {
		fmt.Fprintf(w, "%s was free: nothing removed\n", oneLine(in.Key))
		return
	}
	owner := in.Owner
	if owner == "" {
		owner = "(no description)"
	}
	left := "unknown"
	if in.Remaining > 0 {
		left = roundDuration(in.Remaining).String()
	}
	fmt.Fprintf(w, "broke %s: removed the hold with token %d, owner %s, %s of lease left\n",
		oneLine(in.Key), in.Token, oneLine(owner), left)
	fmt.Fprintf(w, "the next holder's token will be higher than %d: a fence refuses the broken holder's writes\n", in.Token)
}

// shellQuote quotes s for a command line shown to the user.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '/' || r == '.' || r == ':') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
