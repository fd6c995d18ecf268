package lockctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
)

const runHelp = `Usage: lockctl run [flags] KEY -- COMMAND [ARGS...]

Runs COMMAND while holding the lock KEY, as flock(1), etcdctl lock and
consul lock do, on every backend: a cron job started on several machines
runs on one at a time. With --permits N, KEY is a semaphore of N permits
and COMMAND runs while holding one: at most N at a time across hosts
(every lockctl on KEY must give the same N; one that disagrees with a
holder exits 64). With --readers N, KEY is a read-write lock of at most N
readers: COMMAND runs as its writer (alone), or with --read as one of its
readers (beside other readers); a writer waiting keeps readers that come
after it out until it has run (every lockctl on KEY must give the same N).

  lockctl run --wait 0 nightly-report -- ./report.sh        # skip if running elsewhere
  lockctl run -n -E 0 nightly-report -- ./report.sh         # the same, and a skip exits 0 (cron)
  lockctl run --backend etcd://10.0.0.1:2379 db-migrate -- make migrate
  lockctl run --metrics nightly-report -- ./report.sh       # wait, hold and renewal figures at exit
  lockctl run --permits 3 transcode -- ./transcode.sh       # at most 3 at a time
  lockctl run -n -E 0 --min-hold 50s every-minute -- ./job.sh
      # at most once a minute across hosts whose clocks or crons are apart
  lockctl run --max-hold 10m db-vacuum -- ./vacuum.sh        # stop it after 10 minutes
  lockctl run --readers 8 --read catalog -- ./export.sh     # a reader, beside up to 7 others
  lockctl run --readers 8 catalog -- ./reindex.sh           # the writer, alone

While COMMAND runs, lockctl renews the lease (every TTL/3) and:
  - gives COMMAND DLOCK_KEY (the key) and DLOCK_TOKEN (the fencing token,
    larger for every new holder of KEY: hand it to what the lock protects);
    with --permits, DLOCK_TOKEN is the permit's, larger for every new
    holder of that permit, whose key is DLOCK_PERMIT_KEY; with --readers,
    DLOCK_LOCK_MODE is read or write and DLOCK_TOKEN is larger for every
    writer than every token before it (see docs/rwmutex.md for a reader's);
  - forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to
    COMMAND's process group (COMMAND runs in a group of its own, made the
    terminal's foreground job when lockctl is one);
  - if the lock is lost (renewals failed, or it was broken from outside),
    signals the group at once: SIGTERM, then SIGKILL after --grace
    (--on-lost term), or SIGKILL (--on-lost kill). The loss is noticed
    before the lease can expire elsewhere when renewals fail; a lock broken
    from outside may already be held by someone else. COMMAND also gets the
    --on-lost signal if lockctl itself dies.
With --min-hold D, the lock stays held on the backend until D has passed
from its acquisition, even when COMMAND ends sooner or lockctl dies (the
lease asked for is at least D): another lockctl run -n on KEY within D
skips. With --max-hold D, the lock is released D after its acquisition and
COMMAND is signalled as for a lost lock (exit 76).
When COMMAND ends, the lock is released and lockctl exits with COMMAND's
status (128+N if it died of signal N), except:
  64  usage error (bad flag, key, TTL or URL)
  69  backend error (unreachable or failing backend)
  75  not acquired: KEY is held elsewhere and --wait ran out, or was 0
      (--conflict-exit-code N, or -E N as in flock(1), exits N instead)
  76  the lock was lost while COMMAND ran (whatever COMMAND's status)
  126 COMMAND could not be executed, 127 COMMAND was not found
  128+N lockctl was interrupted by signal N while waiting for the lock

The backend is --backend, else $DLOCK_URL, else file:// (one host, no server).
`

// runConfig is a parsed lockctl run command line.
type runConfig struct {
	url     string
	key     string
	ttl     time.Duration // unless ttlSet, 0: the backend URL's default
	ttlSet  bool          // --ttl was given (0 or less is then an error)
	wait    time.Duration // < 0: forever
	onLost  syscall.Signal
	grace   time.Duration // < 0: TTL/20
	verbose bool
	metrics bool
	permits int           // > 0: hold one permit of a semaphore of that many
	readers int           // > 0: KEY is a read-write lock of that many readers
	read    bool          // with readers: hold it as a reader, else as the writer
	minHold time.Duration // --min-hold: 0 for none
	maxHold time.Duration // --max-hold: 0 for none
	// conflictExit is the exit status when KEY is held elsewhere (--wait
	// ran out or was 0): ExitNotAcquired unless --conflict-exit-code.
	conflictExit int
	argv         []string
	elect        bool // lockctl elect: the key is an election's name
}

// noun names what lockctl holds, in messages.
func (c runConfig) noun() string {
	if c.elect {
		return "leadership of"
	}
	return "lock"
}

func runMain(ctx context.Context, args []string, sys IO) int {
	cfg, code, ok := parseRun(args, sys)
	if !ok {
		return code
	}
	return run(ctx, cfg, sys)
}

func parseRun(args []string, sys IO) (runConfig, int, bool) {
	cfg := runConfig{grace: -1, conflictExit: ExitNotAcquired}
	fs := newFlags("run", runHelp, sys)
	fs.StringVar(&cfg.url, "backend", "", "backend `URL` (default $DLOCK_URL, else file://)")
	fs.DurationVar(&cfg.ttl, "ttl", 0, "lease `length`, above 0; renewed every TTL/3 while COMMAND runs (default: the URL's ttl=, else 30s)")
	wait := waitValue{d: -1}
	fs.Var(&wait, "wait", "how long to wait for the lock: a `duration`, 0 to fail at once, or forever")
	nonblock := fs.Bool("n", false, "same as --wait 0")
	fs.IntVar(&cfg.conflictExit, "conflict-exit-code", ExitNotAcquired, "exit `status` (0 to 255) when KEY is held elsewhere and --wait ran out or was 0; 0 counts a skip as success")
	fs.IntVar(&cfg.conflictExit, "E", ExitNotAcquired, "same as --conflict-exit-code `status`, as flock(1) spells it")
	onLost := fs.String("on-lost", "term", "what COMMAND gets when the lock is lost: `term` (SIGTERM, SIGKILL after --grace) or kill")
	grace := graceValue{d: -1}
	fs.Var(&grace, "grace", "with --on-lost term, `time` between SIGTERM and SIGKILL")
	fs.BoolVar(&cfg.verbose, "v", false, "report acquisition and release on stderr")
	fs.IntVar(&cfg.permits, "permits", 0, "hold one of `N` permits of the semaphore KEY instead of the lock KEY: at most N commands at a time")
	fs.DurationVar(&cfg.minHold, "min-hold", 0, "keep the lock held on the backend at least `duration` from its acquisition, even if COMMAND ends sooner or lockctl dies")
	fs.DurationVar(&cfg.maxHold, "max-hold", 0, "release the lock `duration` after its acquisition, signalling COMMAND as for a lost lock")
	fs.IntVar(&cfg.readers, "readers", 0, "KEY is a read-write lock of at most `N` readers: run COMMAND as its writer, or with --read as a reader")
	fs.BoolVar(&cfg.read, "read", false, "with --readers, run COMMAND as a reader of KEY")
	fs.BoolVar(&cfg.metrics, "metrics", false, "print the lock's figures (wait, hold, renewals and their margin, losses) on stderr at exit")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return cfg, code, false
	}
	cfg.wait, cfg.grace, cfg.ttlSet = wait.d, grace.d, flagGiven(fs, "ttl")
	if *nonblock {
		cfg.wait = 0
	}
	if cfg.conflictExit < 0 || cfg.conflictExit > 255 {
		return cfg, usageError(sys.Stderr, "run: --conflict-exit-code %d: want an exit status from 0 to 255", cfg.conflictExit), false
	}
	if cfg.minHold < 0 || cfg.maxHold < 0 || (cfg.minHold > 0 && cfg.maxHold > 0 && cfg.maxHold < cfg.minHold) {
		return cfg, usageError(sys.Stderr, "run: --min-hold %v, --max-hold %v: want durations of 0 or more, the maximum no shorter than the minimum", cfg.minHold, cfg.maxHold), false
	}
	if cfg.permits < 0 || (cfg.permits == 0 && permitsSet(fs)) {
		return cfg, usageError(sys.Stderr, "run: --permits %d: want at least 1", cfg.permits), false
	}
	if cfg.readers < 0 || (cfg.readers == 0 && flagGiven(fs, "readers")) {
		return cfg, usageError(sys.Stderr, "run: --readers %d: want at least 1", cfg.readers), false
	}
	if cfg.read && cfg.readers == 0 {
		return cfg, usageError(sys.Stderr, "run: --read needs --readers N (the read-write lock's number of readers)"), false
	}
	if cfg.readers > 0 && cfg.permits > 0 {
		return cfg, usageError(sys.Stderr, "run: --readers and --permits: give one"), false
	}
	if code, ok := parseHoldArgs(&cfg, "run", "KEY", *onLost, fs.Args(), sys); !ok {
		return cfg, code, false
	}
	return cfg, 0, true
}

// parseHoldArgs finishes a run or elect command line (cmd) into cfg:
// --on-lost, --ttl, and the arguments NOUN -- COMMAND [ARGS...], the flags
// all before NOUN; and the backend URL's default.
func parseHoldArgs(cfg *runConfig, cmd, noun, onLost string, rest []string, sys IO) (int, bool) {
	switch onLost {
	case "term", "TERM", "SIGTERM":
		cfg.onLost = syscall.SIGTERM
	case "kill", "KILL", "SIGKILL":
		cfg.onLost = syscall.SIGKILL
	default:
		return usageError(sys.Stderr, "%s: --on-lost %q: want term or kill", cmd, onLost), false
	}
	// One rule with dlock.WithTTL and a URL's ttl=: a TTL given must be
	// positive; only leaving --ttl out means the URL's default.
	if cfg.ttlSet && cfg.ttl <= 0 {
		return usageError(sys.Stderr, "%s: --ttl: %v", cmd, fmt.Errorf("%w: TTL must be positive, got %v", dlock.ErrInvalidOption, cfg.ttl)), false
	}
	synopsis := fmt.Sprintf("lockctl %s [flags] %s -- COMMAND [ARGS...]", cmd, noun)
	if len(rest) == 0 {
		return usageError(sys.Stderr, "%s: missing %s and COMMAND: %s", cmd, noun, synopsis), false
	}
	cfg.key, rest = rest[0], rest[1:]
	switch {
	case len(rest) > 0 && rest[0] == "--":
		rest = rest[1:]
	case len(rest) > 0 && strings.HasPrefix(rest[0], "-") && slices.Contains(rest, "--"):
		return usageError(sys.Stderr, "%s: flag %s after %s: flags go before %s (lockctl %s [flags] %s -- COMMAND)",
			cmd, rest[0], noun, noun, cmd, noun), false
	}
	if len(rest) == 0 {
		return usageError(sys.Stderr, "%s: missing COMMAND: %s", cmd, synopsis), false
	}
	cfg.argv = rest
	cfg.url = backendURL(cfg.url, sys)
	return 0, true
}

// forwarded are the signals lockctl passes on to COMMAND.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

func run(ctx context.Context, cfg runConfig, sys IO) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if strings.HasPrefix(strings.ToLower(cfg.url), "mem:") {
		fmt.Fprintln(sys.Stderr, "lockctl: warning: mem:// locks exclude only within this lockctl process; use file:// or a server")
	}
	var obs []dlock.Option
	if cfg.metrics {
		mx := newMetrics()
		obs = append(obs, dlock.WithObserver(mx))
		defer mx.print(sys.Stderr) // after Close: the release is counted
	}
	l, err := open(ctx, cfg.url, obs...)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	defer l.Close()
	var opts []dlock.Option
	if cfg.ttl > 0 {
		opts = append(opts, dlock.WithTTL(cfg.ttl))
	}
	if cfg.minHold > 0 {
		opts = append(opts, dlock.WithMinHold(cfg.minHold))
	}
	if cfg.maxHold > 0 {
		opts = append(opts, dlock.WithMaxHold(cfg.maxHold))
	}
	m, err := newHolder(l, cfg, opts)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	if code, ok := acquire(ctx, m, cfg, sigs, sys); !ok {
		return code
	}
	if cfg.verbose {
		fmt.Fprintf(sys.Stderr, "lockctl: acquired %q (token %d, lease %v) on %s\n", permitKey(m, cfg.key), m.Token(), m.Lease().TTL, redact(cfg.url))
	}
	if cfg.grace < 0 {
		cfg.grace = m.Lease().TTL / 20
	}
	return supervise(m, cfg, sigs, sys)
}

// acquire takes the lock, waiting as --wait says; a forwarded signal ends
// the wait. It returns (0, true) when the lock is held.
func acquire(ctx context.Context, m holder, cfg runConfig, sigs <-chan os.Signal, sys IO) (int, bool) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got os.Signal
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case got = <-sigs:
			cancel()
		case <-stop:
		}
	}()
	err := lockFor(actx, m, cfg.wait)
	close(stop)
	<-stopped
	if got != nil {
		if err == nil {
			unlock(m, sys)
		}
		fmt.Fprintf(sys.Stderr, "lockctl: interrupted by %v while waiting for %q\n", got, cfg.key)
		return exitSignalBase + int(got.(syscall.Signal)), false
	}
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, dlock.ErrNotAcquired) && cfg.wait > 0:
		fmt.Fprintf(sys.Stderr, "lockctl: %q still held by another owner after waiting %v\n", cfg.key, cfg.wait)
		return cfg.conflictExit, false
	case errors.Is(err, dlock.ErrNotAcquired):
		fmt.Fprintf(sys.Stderr, "lockctl: %q is held by another owner\n", cfg.key)
		return cfg.conflictExit, false
	case errors.Is(err, dlock.ErrInvalidOption) && cfg.permits > 0:
		code := fail(sys.Stderr, err)
		fmt.Fprintf(sys.Stderr, "lockctl: to change the number of permits, stop every client of the old number, then run \"lockctl break --permits OLD %s\"\n", shellQuote(cfg.key))
		return code, false
	case errors.Is(err, dlock.ErrInvalidOption) && cfg.readers > 0:
		code := fail(sys.Stderr, err)
		fmt.Fprintf(sys.Stderr, "lockctl: to change the number of readers, stop every client of the old number, then run \"lockctl break --permits OLD %s\"\n", shellQuote(cfg.key+"#rw/read"))
		return code, false
	default:
		return fail(sys.Stderr, err), false
	}
}

// lockFor takes m: one attempt when wait is 0, else waiting up to wait
// (forever when negative). A wait that runs out is ErrNotAcquired.
func lockFor(ctx context.Context, m holder, wait time.Duration) error {
	switch {
	case wait == 0:
		ctx, cancel := context.WithTimeout(ctx, openTimeout)
		defer cancel()
		return m.TryLock(ctx)
	case wait > 0:
		wctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		// One attempt first: if the backend answers "held", a wait that
		// then runs out means the lock stayed held. (Lock alone cannot
		// tell: on backends that queue on the server, dlock reports a
		// deadline reached while queued as possibly unavailable.)
		err := m.TryLock(wctx)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			return err
		}
		err = m.Lock(wctx)
		if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return fmt.Errorf("%w: still held after %v", dlock.ErrNotAcquired, wait)
		}
		return err
	default:
		return m.Lock(ctx)
	}
}

// unlock releases m, bounded in time; it reports whether the hold was lost.
func unlock(m holding, sys IO) (lost bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	err = m.Unlock(ctx)
	if err != nil && !errors.Is(err, dlock.ErrLockLost) {
		fmt.Fprintf(sys.Stderr, "lockctl: warning: %v (the lease ends by itself after its TTL)\n", err)
	}
	return errors.Is(err, dlock.ErrLockLost), err
}
