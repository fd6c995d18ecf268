package lockctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlock-go/dlock"
)

// ExitHeld is lockctl status's answer when at least one key is held (0:
// every key is free), as grep(1) answers 0/1; an error is one of the
// codes of exit.go (64 usage, 69 backend), never 1.
const ExitHeld = 1

const statusHelp = `Usage: lockctl status [flags] KEY...

Reports, for each KEY, what the backend's server holds: whether it is held,
the holder's fencing token, how long its lease still runs on the server,
the holder's description (dlock.WithOwner: by default host, PID and
program) and, on backends that queue on the server (etcd, ZooKeeper), how
many wait for it. Nothing is changed.

  lockctl status --backend etcd://10.0.0.1:2379 nightly-report db-migrate
  lockctl status --json nightly-report | jq .keys[0].owner

Exit status:
  0   every KEY is free
  1   at least one KEY is held
  64  usage error (bad flag, key or URL)
  69  backend error (unreachable, failing, or it cannot inspect keys)

The backend is --backend, else $DLOCK_URL, else file:// (one host, no server).
`

// statusJSON is lockctl status --json's document.
type statusJSON struct {
	Backend string    `json:"backend"`
	Keys    []keyJSON `json:"keys"`
}

// keyJSON is one key's Info for machines: durations in milliseconds,
// waiters null for a backend without a server-side queue.
type keyJSON struct {
	Key         string  `json:"key"`
	Held        bool    `json:"held"`
	Token       uint64  `json:"token"`
	LeaseLeftMS float64 `json:"lease_left_ms"`
	Owner       string  `json:"owner"`
	Waiters     *int    `json:"waiters"`
}

func toKeyJSON(in dlock.Info) keyJSON {
	k := keyJSON{Key: in.Key, Held: in.Held, Token: uint64(in.Token), Owner: in.Owner,
		LeaseLeftMS: float64(in.Remaining) / float64(time.Millisecond)}
	if in.Waiters >= 0 {
		w := in.Waiters
		k.Waiters = &w
	}
	return k
}

func statusMain(ctx context.Context, args []string, sys IO) int {
	fs := newFlags("status", statusHelp, sys)
	rawURL := fs.String("backend", "", "backend `URL` (default $DLOCK_URL, else file://)")
	asJSON := fs.Bool("json", false, "print a JSON document instead of the table")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return code
	}
	keys := fs.Args()
	if len(keys) == 0 {
		return usageError(sys.Stderr, "status: missing KEY: lockctl status [flags] KEY...")
	}
	u := backendURL(*rawURL, sys)
	l, err := open(ctx, u)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	defer l.Close()
	infos := make([]dlock.Info, 0, len(keys))
	for _, k := range keys {
		ictx, cancel := context.WithTimeout(ctx, openTimeout)
		in, err := l.Inspect(ictx, k)
		cancel()
		if err != nil {
			return fail(sys.Stderr, err)
		}
		infos = append(infos, in)
	}
	if *asJSON {
		doc := statusJSON{Backend: redact(u), Keys: make([]keyJSON, 0, len(infos))}
		for _, in := range infos {
			doc.Keys = append(doc.Keys, toKeyJSON(in))
		}
		enc := json.NewEncoder(sys.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return fail(sys.Stderr, err)
		}
	} else {
		writeStatusTable(sys.Stdout, infos)
	}
	return statusCode(infos)
}

// statusCode is 0 when every key is free, ExitHeld when one is held.
func statusCode(infos []dlock.Info) int {
	for _, in := range infos {
		if in.Held {
			return ExitHeld
		}
	}
	return 0
}

// writeStatusTable prints infos for people.
func writeStatusTable(w io.Writer, infos []dlock.Info) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tHELD\tTOKEN\tLEASE LEFT\tOWNER\tWAITERS")
	for _, in := range infos {
		held, token, left, owner := "no", "-", "-", "-"
		if in.Held {
			held, token = "yes", strconv.FormatUint(uint64(in.Token), 10)
			if in.Remaining > 0 {
				left = roundDuration(in.Remaining).String()
			} else {
				left = "unknown"
			}
			if in.Owner != "" {
				owner = oneLine(in.Owner)
			}
		}
		waiters := "n/a"
		if in.Waiters >= 0 {
			waiters = strconv.Itoa(in.Waiters)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", oneLine(in.Key), held, token, left, owner, waiters)
	}
	_ = tw.Flush()
}

// roundDuration keeps a duration readable: seconds from a minute,
// milliseconds from 10ms, microseconds below.
func roundDuration(d time.Duration) time.Duration {
	a := d
	if a < 0 {
		a = -a
	}
	switch {
	case a >= time.Minute:
		return d.Round(time.Second)
	case a >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// oneLine keeps a table row on one line: control characters (a key or an
// owner description may hold any UTF-8) are quoted.
func oneLine(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\t' {
			q := strconv.Quote(s)
			return q[1 : len(q)-1]
		}
	}
	return strings.TrimSpace(s)
}
