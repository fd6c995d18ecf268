package lockctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dlock-go/dlock"
)

const electHelp = `Usage: lockctl elect [flags] NAME -- COMMAND [ARGS...]

Campaigns in the election NAME and runs COMMAND while this process leads
it: of the hosts running the same line, one runs COMMAND at a time, and
another takes over when it stops or loses leadership.

  lockctl elect scheduler -- ./scheduler
  lockctl elect --backend etcd://10.0.0.1:2379 --value "$(hostname)" scheduler -- ./scheduler

lockctl waits for leadership (on the backend's notifications), then runs
COMMAND and renews the leadership's lease (every TTL/3). COMMAND gets
DLOCK_KEY (NAME) and DLOCK_TOKEN (the term: larger for every new leader,
hand it to what the leader writes to, so that a deposed leader's late
writes are refused). Signals are forwarded as for lockctl run. If
leadership is lost (renewals failed, or it was broken from outside),
COMMAND's group gets SIGTERM, then SIGKILL after --grace (--on-lost term),
or SIGKILL (--on-lost kill), before the lease can expire elsewhere when
renewals fail. "lockctl status NAME" shows the leader; its OWNER is the
leader's --value.

When COMMAND ends, lockctl resigns and exits with COMMAND's status (128+N
if it died of signal N), except:
  64  usage error (bad flag, name, value, TTL or URL)
  69  backend error (unreachable or failing backend)
  75  not leader: --wait ran out before this process was elected
  76  leadership was lost while COMMAND ran (whatever COMMAND's status)
  126 COMMAND could not be executed, 127 COMMAND was not found
  128+N lockctl was interrupted by signal N while campaigning

The backend is --backend, else $DLOCK_URL, else file:// (one host, no server).
`

// electConfig is a parsed lockctl elect command line.
type electConfig struct {
	runConfig
	value string
}

func electMain(ctx context.Context, args []string, sys IO) int {
	cfg, code, ok := parseElect(args, sys)
	if !ok {
		return code
	}
	return elect(ctx, cfg, sys)
}

func parseElect(args []string, sys IO) (electConfig, int, bool) {
	cfg := electConfig{runConfig: runConfig{grace: -1, elect: true}}
	fs := newFlags("elect", electHelp, sys)
	fs.StringVar(&cfg.url, "backend", "", "backend `URL` (default $DLOCK_URL, else file://)")
	fs.DurationVar(&cfg.ttl, "ttl", 0, "leadership lease `length`, above 0; renewed every TTL/3 while COMMAND runs (default: the URL's ttl=, else 30s)")
	fs.StringVar(&cfg.value, "value", "", "what this candidate is known by while it leads (default host=... pid=... prog=lockctl)")
	wait := waitValue{d: -1}
	fs.Var(&wait, "wait", "how long to campaign: a `duration`, or forever")
	onLost := fs.String("on-lost", "term", "what COMMAND gets when leadership is lost: `term` (SIGTERM, SIGKILL after --grace) or kill")
	grace := graceValue{d: -1}
	fs.Var(&grace, "grace", "with --on-lost term, `time` between SIGTERM and SIGKILL")
	fs.BoolVar(&cfg.verbose, "v", false, "report election and resignation on stderr")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return cfg, code, false
	}
	cfg.wait, cfg.grace, cfg.ttlSet = wait.d, grace.d, flagGiven(fs, "ttl")
	if cfg.wait == 0 {
		return cfg, usageError(sys.Stderr, "elect: --wait 0: a campaign waits; give a duration or forever"), false
	}
	if code, ok := parseHoldArgs(&cfg.runConfig, "elect", "NAME", *onLost, fs.Args(), sys); !ok {
		return cfg, code, false
	}
	if cfg.value == "" {
		host, _ := os.Hostname()
		cfg.value = "host=" + host + " pid=" + strconv.Itoa(os.Getpid()) + " prog=" + filepath.Base(os.Args[0])
	}
	return cfg, 0, true
}

// leadership is an Election's leadership as supervise sees a hold.
type leadership struct{ e *dlock.Election }

func (l leadership) Done() <-chan struct{}            { return l.e.Done() }
func (l leadership) Token() dlock.Token               { return l.e.Token() }
func (l leadership) Unlock(ctx context.Context) error { return l.e.Unlock(ctx) }

func elect(ctx context.Context, cfg electConfig, sys IO) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if strings.HasPrefix(strings.ToLower(cfg.url), "mem:") {
		fmt.Fprintln(sys.Stderr, "lockctl: warning: mem:// elections are decided only within this lockctl process; use file:// or a server")
	}
	l, err := open(ctx, cfg.url)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	defer l.Close()
	var opts []dlock.Option
	if cfg.ttl > 0 {
		opts = append(opts, dlock.WithTTL(cfg.ttl))
	}
	e, err := l.NewElection(cfg.key, opts...)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	if code, ok := campaignFor(ctx, e, cfg, sigs, sys); !ok {
		return code
	}
	if cfg.verbose {
		fmt.Fprintf(sys.Stderr, "lockctl: leading %q as %q (term %d, lease %v) on %s\n", cfg.key, cfg.value, e.Token(), e.Lease().TTL, redact(cfg.url))
	}
	if cfg.grace < 0 {
		cfg.grace = e.Lease().TTL / 20
	}
	return supervise(leadership{e}, cfg.runConfig, sigs, sys)
}

// campaignFor campaigns as --wait says; a forwarded signal ends the
// campaign. It returns (0, true) once this process leads.
func campaignFor(ctx context.Context, e *dlock.Election, cfg electConfig, sigs <-chan os.Signal, sys IO) (int, bool) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.wait > 0 {
		var c context.CancelFunc
		cctx, c = context.WithTimeout(cctx, cfg.wait)
		defer c()
	}
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
	err := e.Campaign(cctx, cfg.value)
	close(stop)
	<-stopped
	if got != nil {
		if err == nil {
			_, _ = unlock(leadership{e}, sys)
		}
		fmt.Fprintf(sys.Stderr, "lockctl: interrupted by %v while campaigning for %q\n", got, cfg.key)
		return exitSignalBase + int(got.(syscall.Signal)), false
	}
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !errors.Is(err, dlock.ErrUnavailable):
		leader := "another candidate"
		lctx, lcancel := context.WithTimeout(context.WithoutCancel(ctx), openTimeout)
		defer lcancel()
		if l, lerr := e.Leader(lctx); lerr == nil {
			leader = fmt.Sprintf("%q (term %d)", l.Value, l.Token)
		}
		fmt.Fprintf(sys.Stderr, "lockctl: not elected in %q after campaigning %v: %s leads\n", cfg.key, cfg.wait, leader)
		return ExitNotAcquired, false
	default:
		return fail(sys.Stderr, err), false
	}
}
