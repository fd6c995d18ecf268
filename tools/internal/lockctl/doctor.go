package lockctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Exit statuses of lockctl doctor (besides 64 usage and 69 backend error).
const (
	ExitDoctorWarn   = 1 // a setting weakens a promise
	ExitDoctorBroken = 2 // a setting breaks a promise
)

const doctorHelp = `Usage: lockctl doctor [flags] [URL]

Connects to the backend at URL (or --backend, $DLOCK_URL) and reports every
setting of the deployment that weakens one of dlock's promises (exclusion
inside the validity window, increasing fencing tokens, the loss signal):
what it means and how to fix it. Each finding has a stable ID for scripts.

  lockctl doctor redis://10.0.0.1:6379
  lockctl doctor --json etcd://10.0.0.1:2379 | jq '.findings[] | select(.level != "ok")'

Levels: ok (checked, fine), info (a fact, or something doctor could not
read), warning (weakens a promise), broken (a setting breaks one).

Exit status:
  0   nothing weakens a promise (only ok and info)
  1   at least one warning
  2   at least one setting breaks a promise
  64  usage error (bad flag or URL)
  69  backend error (unreachable or failing)

The lease compared against (round trip, session timeout, drift allowance)
is --ttl, else the URL's ttl=, else dlock's default (30s).
`

// Level is how much a finding matters.
type Level string

// The levels of a finding, from harmless to breaking.
const (
	LevelOK      Level = "ok"
	LevelInfo    Level = "info"
	LevelWarning Level = "warning"
	LevelBroken  Level = "broken"
)

func (l Level) rank() int {
	switch l {
	case LevelWarning:
		return 1
	case LevelBroken:
		return 2
	}
	return 0
}

// Finding is one thing doctor checked.
type Finding struct {
	// ID is stable across releases ("redis.maxmemory-policy"), for scripts
	// and tests.
	ID    string `json:"id"`
	Level Level  `json:"level"`
	// Summary says what was found, Meaning what it does to dlock's
	// promises, Fix how to repair it (empty when nothing is wrong).
	Summary string `json:"summary"`
	Meaning string `json:"meaning,omitempty"`
	Fix     string `json:"fix,omitempty"`
}

// doctorReport is lockctl doctor's result.
type doctorReport struct {
	Backend  string    `json:"backend"`
	TTLms    float64   `json:"ttl_ms"`
	Findings []Finding `json:"findings"`
	Status   int       `json:"status"`
}

// doctor is what one backend's checks have at hand.
type doctor struct {
	u        *url.URL
	ttl      time.Duration
	ttlSet   bool // by --ttl or ttl=
	findings []Finding
}

func (d *doctor) add(id string, level Level, summary, meaning, fix string) {
	d.findings = append(d.findings, Finding{ID: id, Level: level, Summary: summary, Meaning: meaning, Fix: fix})
}

func (d *doctor) ok(id, summary string)   { d.add(id, LevelOK, summary, "", "") }
func (d *doctor) info(id, summary string) { d.add(id, LevelInfo, summary, "", "") }

// unknown reports a setting doctor could not read.
func (d *doctor) unknown(id string, err error) {
	d.add(id, LevelInfo, "could not read: "+oneLine(err.Error()), "doctor cannot tell whether this setting weakens a promise", "")
}

// driftAllowance is the clock drift dlock subtracts from every validity
// window (DESIGN §1): TTL*1% + 2ms.
func driftAllowance(ttl time.Duration) time.Duration { return driver.DriftAllowance(ttl) }

// clockSkew checks server time against this host's: serverTime was read
// between before and after (local wall clock), with the server clock's
// resolution res. The validity window is measured on this host's monotonic
// clock alone, so an offset by itself breaks nothing; but clocks that
// disagree by more than the drift allowance are not kept in step (NTP), and
// their rates may then differ by more than the 1% dlock allows for.
func (d *doctor) clockSkew(id string, serverTime, before, after time.Time, res time.Duration) {
	mid := before.Add(after.Sub(before) / 2)
	skew := serverTime.Sub(mid)
	uncertain := after.Sub(before)/2 + res
	allow := driftAllowance(d.ttl)
	abs := skew
	if abs < 0 {
		abs = -abs
	}
	summary := fmt.Sprintf("server clock %+v from this host's (±%v), drift allowance %v", roundDuration(skew), roundDuration(uncertain), allow)
	if abs-uncertain > allow {
		d.add(id, LevelWarning, summary,
			"dlock measures the validity window on this host's clock and allows for drift of TTL*1%+2ms; clocks this far apart are not synchronised, so their rates may differ by more, and server-time-based guards (Redis token floors) may run behind",
			"run NTP (chrony, systemd-timesyncd) on this host and on the servers")
		return
	}
	d.ok(id, summary)
}

// roundTrip checks a measured round trip against the lease.
func (d *doctor) roundTrip(id string, rtt time.Duration) {
	summary := fmt.Sprintf("round trip %v against a lease of %v", roundDuration(rtt), d.ttl)
	switch {
	case rtt > driver.RenewInterval(d.ttl):
		d.add(id, LevelBroken, summary,
			"a renewal every TTL/3 cannot complete before the next one is due: holds are lost at once, and the validity window is mostly spent on the wire",
			"use a longer TTL (?ttl=) or a backend closer to this host")
	case rtt > driver.LossMargin(d.ttl):
		d.add(id, LevelWarning, summary,
			"more than a tenth of each lease goes to the round trip: the validity window shrinks by it, and a slow renewal risks loss",
			"use a longer TTL (?ttl=) or a backend closer to this host")
	default:
		d.ok(id, summary)
	}
}

func doctorMain(ctx context.Context, args []string, sys IO) int {
	fs := newFlags("doctor", doctorHelp, sys)
	rawURL := fs.String("backend", "", "backend `URL` (default $DLOCK_URL, else file://)")
	asJSON := fs.Bool("json", false, "print a JSON document instead of the report")
	ttl := fs.Duration("ttl", 0, "the `lease` your locks use (default: the URL's ttl=, else 30s)")
	if code, ok := parseFlags(fs, args, sys); !ok {
		return code
	}
	rest := fs.Args()
	switch {
	case len(rest) > 1:
		return usageError(sys.Stderr, "doctor: one URL at a time (flags go before URL)")
	case len(rest) == 1 && *rawURL != "":
		return usageError(sys.Stderr, "doctor: URL given twice (--backend and argument)")
	case len(rest) == 1:
		*rawURL = rest[0]
	}
	if *ttl < 0 {
		return usageError(sys.Stderr, "doctor: --ttl %v: want a positive duration", *ttl)
	}
	u := backendURL(*rawURL, sys)
	rep, err := runDoctor(ctx, u, *ttl)
	if err != nil {
		return fail(sys.Stderr, err)
	}
	if *asJSON {
		enc := json.NewEncoder(sys.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail(sys.Stderr, err)
		}
	} else {
		writeDoctor(sys.Stdout, rep)
	}
	return rep.Status
}

// runDoctor validates rawURL as dlock.Open does (a bad URL is a usage
// error, an unreachable backend a backend error), then runs the checks of
// its scheme with the backend's own client.
func runDoctor(ctx context.Context, rawURL string, ttl time.Duration) (doctorReport, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return doctorReport{}, fmt.Errorf("%w: %v", dlock.ErrInvalidURL, err)
	}
	ttlSet := ttl > 0 || u.Query().Has("ttl")
	if ttl == 0 {
		ttl = dlock.DefaultTTL
		if v := u.Query().Get("ttl"); v != "" {
			if ttl, err = time.ParseDuration(v); err != nil || ttl <= 0 {
				return doctorReport{}, fmt.Errorf("%w: ttl=%s: want a positive duration", dlock.ErrInvalidURL, v)
			}
		}
	}
	// A URL dlock.Open refuses is a usage error. Open may also refuse a
	// reachable backend for a setting (Redis eviction): doctor still
	// examines it, and reports the refusal; an unreachable one fails the
	// checks below too.
	l, openErr := open(ctx, rawURL)
	if openErr == nil {
		_ = l.Close()
	} else if errors.Is(openErr, dlock.ErrInvalidURL) {
		return doctorReport{}, openErr
	}
	d := &doctor{u: u, ttl: ttl, ttlSet: ttlSet}
	cctx, cancel := context.WithTimeout(ctx, 2*openTimeout)
	defer cancel()
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme == "redis" || scheme == "rediss" || strings.HasPrefix(scheme, "redis+") || strings.HasPrefix(scheme, "rediss+"):
		err = d.redis(cctx)
	case scheme == "redlock":
		err = d.redlock(cctx)
	case scheme == "etcd":
		err = d.etcd(cctx)
	case scheme == "zk":
		err = d.zookeeper(cctx)
	case scheme == "consul":
		err = d.consul(cctx)
	case scheme == "postgres" || scheme == "postgresql":
		err = d.postgres(cctx)
	case scheme == "file":
		d.info("file.local", "file:// locks are flock(2) on this host's file system: no server, no lease settings to check (a network file system's locking is not supported)")
	case scheme == "mem":
		d.add("mem.one-process", LevelWarning, "mem:// locks exclude only within one process",
			"two processes (two lockctl runs) each get the lock", "use file:// on one host, or a server backend")
	default:
		d.info("doctor.unknown-scheme", "doctor has no checks for "+scheme+"://")
	}
	if err != nil {
		if openErr != nil {
			return doctorReport{}, openErr
		}
		return doctorReport{}, fmt.Errorf("doctor %s: %w", redact(rawURL), err)
	}
	if openErr != nil {
		d.add("open", LevelBroken, "dlock.Open refuses this backend: "+oneLine(openErr.Error()),
			"no Locker can be opened on it as it is", "fix the settings above (or accept the risk with the parameter the error names)")
	}
	rep := doctorReport{Backend: redact(rawURL), TTLms: float64(d.ttl) / float64(time.Millisecond), Findings: d.findings}
	for _, f := range d.findings {
		if r := f.Level.rank(); r > rep.Status {
			rep.Status = r
		}
	}
	return rep, nil
}

// hosts lists the URL's hosts with the scheme's default port.
func (d *doctor) hosts(port string) ([]string, error) { return driver.Hosts(d.u, port) }

// writeDoctor prints the report for people: findings that need action
// first, each with what it means and the fix.
func writeDoctor(w io.Writer, rep doctorReport) {
	fmt.Fprintf(w, "doctor %s (lease %v)\n", rep.Backend, time.Duration(rep.TTLms*float64(time.Millisecond)))
	explained := map[string]bool{} // meaning and fix once per ID
	for _, lv := range []Level{LevelBroken, LevelWarning, LevelInfo, LevelOK} {
		for _, f := range rep.Findings {
			if f.Level != lv {
				continue
			}
			fmt.Fprintf(w, "%-8s %-32s %s\n", strings.ToUpper(string(f.Level)), f.ID, f.Summary)
			if explained[f.ID+"\x00"+f.Meaning] {
				continue
			}
			explained[f.ID+"\x00"+f.Meaning] = true
			if f.Meaning != "" {
				fmt.Fprintf(w, "         %-32s means: %s\n", "", f.Meaning)
			}
			if f.Fix != "" {
				fmt.Fprintf(w, "         %-32s fix:   %s\n", "", f.Fix)
			}
		}
	}
	switch rep.Status {
	case 0:
		fmt.Fprintln(w, "nothing weakens dlock's promises (exit 0)")
	case ExitDoctorWarn:
		fmt.Fprintln(w, "warnings: some settings weaken dlock's promises (exit 1)")
	default:
		fmt.Fprintln(w, "broken: a setting breaks one of dlock's promises (exit 2)")
	}
}
