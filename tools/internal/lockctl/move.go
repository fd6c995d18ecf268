package lockctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/move"
)

const moveHelp = `Usage: lockctl move status --from X --to Y [KEY...]
       lockctl move commit --from X --to Y [KEY...]

Where a move of a fleet from backend X to backend Y stands
(docs/moving.md). The fleet goes through three configurations, each by a
rolling restart: X (C0), move:?from=X&to=Y (C1), then, after the commit,
move:?to=Y (C2).

status shows whether the move is committed and, for each KEY, who holds
it on each store and in which configuration (C1 and C2 holders tag their
owner description; an untagged holder on X is a C0 instance, one on Y a
client of Y outside the move).

commit writes the commit record on Y: a ceiling of every token X has
issued, above which C2 lifts Y's tokens. Run it once every instance runs
C1. It refuses (exit 75) while a KEY given is held on X by a C0 instance,
or on Y by a client outside the move; it cannot see instances that hold
nothing, so the deployment's own record is the check that counts.

Exit status: 0 done; 64 usage error; 69 backend error; 75 commit refused.
`

func moveMain(ctx context.Context, args []string, sys IO) int {
	if len(args) == 0 || (args[0] != "status" && args[0] != "commit") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(sys.Stdout, moveHelp)
			return 0
		}
		fmt.Fprint(sys.Stderr, moveHelp)
		return ExitUsage
	}
	op := args[0]
	fs := newFlags("move "+op, moveHelp, sys)
	from := fs.String("from", "", "the old backend's `URL` (X)")
	to := fs.String("to", "", "the new backend's `URL` (Y)")
	if code, ok := parseFlags(fs, args[1:], sys); !ok {
		return code
	}
	if *to == "" || (*from == "" && op == "commit") {
		return usageError(sys.Stderr, "move %s: --from and --to are required", op)
	}
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	y, err := dlock.OpenDriver(octx, *to)
	if err != nil {
		return fail(sys.Stderr, fmt.Errorf("move: to %s: %w", redact(*to), err))
	}
	defer y.Close()
	var x driver.Locker
	if *from != "" {
		if x, err = dlock.OpenDriver(octx, *from); err != nil {
			return fail(sys.Stderr, fmt.Errorf("move: from %s: %w", redact(*from), err))
		}
		defer x.Close()
	}
	keys := fs.Args()
	holders, err := moveHolders(octx, x, y, keys)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	if op == "status" {
		return moveStatus(octx, sys.Stdout, y, holders)
	}
	var unsafe []string
	for _, h := range holders {
		if h.x.Held && h.xConfig == move.C0 {
			unsafe = append(unsafe, fmt.Sprintf("%s is held on X by a C0 instance (%s): restart it with the C1 URL first", oneLine(h.key), oneLine(h.x.Meta)))
		}
		if h.y.Held && h.yConfig == move.C0 {
			unsafe = append(unsafe, fmt.Sprintf("%s is held on Y by a client outside the move (%s): it must run the C1 URL", oneLine(h.key), oneLine(h.y.Meta)))
		}
	}
	if len(unsafe) > 0 {
		fmt.Fprintf(sys.Stderr, "lockctl: move commit: refused, not yet safe:\n  %s\n", strings.Join(unsafe, "\n  "))
		return ExitNotAcquired
	}
	r, written, err := move.Commit(octx, x, y, schemeOf(*from))
	if err != nil {
		return fail(sys.Stderr, fmt.Errorf("move: commit: %w", err))
	}
	if written {
		fmt.Fprintf(sys.Stdout, "committed: %s\nC2 (move:?to=Y) may now start; C1 instances go on safely beside it\n", r)
	} else {
		fmt.Fprintf(sys.Stdout, "already committed: %s\n", r)
	}
	return 0
}

func schemeOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "unknown"
	}
	return strings.ToLower(u.Scheme)
}

// moveHolder is what each store holds of one key.
type moveHolder struct {
	key              string
	x, y             driver.Info
	xConfig, yConfig move.Config
}

func moveHolders(ctx context.Context, x, y driver.Locker, keys []string) ([]moveHolder, error) {
	var out []moveHolder
	for _, k := range keys {
		h := moveHolder{key: k}
		var err error
		if x != nil {
			if h.x, err = inspectDriver(ctx, x, k); err != nil {
				return nil, fmt.Errorf("move: inspect %s on X: %w", oneLine(k), err)
			}
			h.xConfig, h.x.Meta = move.Untag(h.x.Meta)
		}
		if h.y, err = inspectDriver(ctx, y, k); err != nil {
			return nil, fmt.Errorf("move: inspect %s on Y: %w", oneLine(k), err)
		}
		h.yConfig, h.y.Meta = move.Untag(h.y.Meta)
		out = append(out, h)
	}
	return out, nil
}

func inspectDriver(ctx context.Context, d driver.Locker, key string) (driver.Info, error) {
	ins, ok := d.(driver.Inspector)
	if !ok {
		return driver.Info{}, errors.New("the backend cannot inspect keys")
	}
	return ins.Inspect(ctx, key)
}

func moveStatus(ctx context.Context, w io.Writer, y driver.Locker, holders []moveHolder) int {
	r, err := move.ReadCommit(ctx, y)
	switch {
	case errors.Is(err, move.ErrNotCommitted):
		fmt.Fprintln(w, "commit: none (C0 and C1 may run; C2 refuses to start)")
	case err != nil:
		return fail(w, err)
	default:
		fmt.Fprintf(w, "commit: %s (C1 and C2 may run; no C0 instance may)\n", r)
	}
	for _, h := range holders {
		fmt.Fprintf(w, "%s:\n", oneLine(h.key))
		fmt.Fprintf(w, "  X: %s\n", describeHolder(h.x, h.xConfig))
		fmt.Fprintf(w, "  Y: %s\n", describeHolder(h.y, h.yConfig))
		if b, ok, err := move.Base(ctx, y, h.key); err == nil && ok {
			fmt.Fprintf(w, "  token base on Y: %d (tokens presented: Y's + %d)\n", b, b)
		}
	}
	return 0
}

func describeHolder(in driver.Info, c move.Config) string {
	if !in.Held {
		return "free"
	}
	owner := in.Meta
	if owner == "" {
		owner = "(no description)"
	}
	return fmt.Sprintf("held in %s by %s, store token %d", strings.ToUpper(string(c)), oneLine(owner), in.Token)
}
