package lockctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestStatusTableAndCode(t *testing.T) {
	free := dlock.Info{Key: "free-key", Waiters: -1}
	held := dlock.Info{Key: "job", Held: true, Token: 1733000000000123, Remaining: 8123456 * time.Microsecond,
		Owner: "host=web-1 pid=4242 prog=report", Waiters: 2}
	if got := statusCode([]dlock.Info{free}); got != 0 {
		t.Errorf("every key free: code %d; want 0", got)
	}
	if got := statusCode([]dlock.Info{free, held}); got != ExitHeld {
		t.Errorf("one key held: code %d; want %d", got, ExitHeld)
	}
	var b strings.Builder
	writeStatusTable(&b, []dlock.Info{free, held, {Key: "odd\nkey", Held: true, Token: 7, Owner: "a\tb", Waiters: 0}})
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	want := [][]string{
		{"KEY", "HELD", "TOKEN", "LEASE", "LEFT", "OWNER", "WAITERS"},
		{"free-key", "no", "-", "-", "-", "n/a"},
		{"job", "yes", "1733000000000123", "8.123s", "host=web-1", "pid=4242", "prog=report", "2"},
		{`odd\nkey`, "yes", "7", "unknown", `a\tb`, "0"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("row %d = %q; want %q", i, got, w)
		}
	}
}

func TestStatusJSON(t *testing.T) {
	k := toKeyJSON(dlock.Info{Key: "job", Held: true, Token: 9, Remaining: 1500 * time.Millisecond, Owner: "o", Waiters: -1})
	out, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"key":"job","held":true,"token":9,"lease_left_ms":1500,"owner":"o","waiters":null}`; got != want {
		t.Errorf("json %s; want %s", got, want)
	}
	out, _ = json.Marshal(toKeyJSON(dlock.Info{Key: "q", Waiters: 3}))
	if !strings.Contains(string(out), `"waiters":3`) || !strings.Contains(string(out), `"held":false`) {
		t.Errorf("json %s; want waiters 3, held false", out)
	}
}

func TestStatusBreakUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"status"}, ExitUsage, "missing KEY"},
		{[]string{"status", "--bogus", "k"}, ExitUsage, "--bogus"},
		{[]string{"break", "--backend", "mem://", "k"}, ExitUsage, "refusing without --force"},
		{[]string{"break", "--force"}, ExitUsage, "missing KEY"},
		{[]string{"break", "--force", "a", "b"}, ExitUsage, "one KEY at a time"},
		{[]string{"status", "--backend", "bogus://x", "k"}, ExitUsage, "bogus"},
		{[]string{"doctor", "a://", "b://"}, ExitUsage, "one URL"},
		{[]string{"doctor", "--ttl", "-1s", "mem://"}, ExitUsage, "--ttl"},
	} {
		sys, _, errb := testIO(nil)
		if got := Main(context.Background(), tc.args, sys); got != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, got, errb.String(), tc.code, tc.msg)
		}
	}
	// The refusal says why: the broken holder may still act; fencing stops it.
	sys, _, errb := testIO(nil)
	Main(context.Background(), []string{"break", "job"}, sys)
	for _, w := range []string{"may still be acting", "larger token", "lockctl status job", "lockctl break --force job"} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("refusal %q lacks %q", errb.String(), w)
		}
	}
}

func TestWriteBreak(t *testing.T) {
	var b strings.Builder
	writeBreak(&b, dlock.Info{Key: "job", Held: true, Token: 41, Remaining: 2 * time.Second, Owner: "host=h pid=1 prog=p"})
	if got := b.String(); !strings.Contains(got, "broke job: removed the hold with token 41, owner host=h pid=1 prog=p, 2s of lease left") ||
		!strings.Contains(got, "higher than 41") {
		t.Errorf("break output %q", got)
	}
	b.Reset()
	writeBreak(&b, dlock.Info{Key: "job"})
	if got := b.String(); got != "job was free: nothing removed\n" {
		t.Errorf("break of a free key: %q", got)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{"job": "job", "a b": "'a b'", "it's": `'it'\''s'`, "ns/k-1.x": "ns/k-1.x"} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestDoctorLevels(t *testing.T) {
	d := &doctor{ttl: 10 * time.Second}
	if got := driftAllowance(d.ttl); got != 102*time.Millisecond {
		t.Errorf("drift allowance of 10s = %v; want 102ms", got)
	}
	now := time.Now()
	d.clockSkew("clock.skew", now.Add(50*time.Millisecond), now, now.Add(2*time.Millisecond), time.Microsecond)
	d.clockSkew("clock.skew", now.Add(time.Second), now, now.Add(2*time.Millisecond), time.Microsecond)
	d.roundTrip("rtt", time.Millisecond)
	d.roundTrip("rtt", 2*time.Second)
	d.roundTrip("rtt", 4*time.Second)
	want := []Level{LevelOK, LevelWarning, LevelOK, LevelWarning, LevelBroken}
	for i, f := range d.findings {
		if f.Level != want[i] {
			t.Errorf("finding %d %s: %s; want %s", i, f.Summary, f.Level, want[i])
		}
	}
	for in, want := range map[string]bool{"3.4.23": true, "3.4.25": false, "3.5.7": true, "3.5.8": false, "3.6.0": false, "3.3.25": true, "v3.5.0-rc.1": true} {
		if got := etcdLeaseBug(in); got != want {
			t.Errorf("etcdLeaseBug(%q) = %v; want %v", in, got, want)
		}
	}
}

// A semaphore's number of permits is recorded by its first client: a run
// with another number is refused with a hint, and break --permits clears
// the record (only the number it names) so that the new number may run.
func TestBreakPermits(t *testing.T) {
	url := "file://" + t.TempDir()
	run := func(args ...string) (int, string, string) {
		t.Helper()
		sys, out, errb := testIO(nil)
		code := Main(context.Background(), append([]string{args[0], "--backend", url}, args[1:]...), sys)
		return code, out.String(), errb.String()
	}
	if code, _, errs := run("run", "--permits", "3", "transcode", "--", "true"); code != 0 {
		t.Fatalf("run --permits 3: exit %d, %s", code, errs)
	}
	code, _, errs := run("run", "--permits", "2", "transcode", "--", "true")
	if code != ExitUsage || !strings.Contains(errs, "3 permits") || !strings.Contains(errs, "lockctl break --permits OLD transcode") {
		t.Fatalf("run --permits 2 on a key recorded with 3: exit %d, %q; want %d, the recorded number and the hint", code, errs, ExitUsage)
	}
	if code, out, errs := run("break", "--permits", "2", "transcode"); code != 0 || !strings.Contains(out, "no record of 2 permits") {
		t.Fatalf("break --permits 2: exit %d, %q %q; want 0, nothing cleared", code, out, errs)
	}
	if code, out, errs := run("break", "--permits", "3", "transcode"); code != 0 || !strings.Contains(out, "cleared transcode's record of 3 permits") {
		t.Fatalf("break --permits 3: exit %d, %q %q; want 0, cleared", code, out, errs)
	}
	if code, _, errs := run("run", "--permits", "2", "transcode", "--", "true"); code != 0 {
		t.Fatalf("run --permits 2 after the reset: exit %d, %s", code, errs)
	}
	if code, _, errs := run("break", "--permits", "0", "transcode"); code != ExitUsage || !strings.Contains(errs, "want at least 1") {
		t.Fatalf("break --permits 0: exit %d, %q; want %d", code, errs, ExitUsage)
	}
	// Refused while a permit is held.
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := l.NewSemaphore("transcode", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Lock(context.Background()); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if code, _, errs := run("break", "--permits", "2", "transcode"); code != ExitNotAcquired || !strings.Contains(errs, "is held") {
		t.Fatalf("break --permits 2 while a permit is held: exit %d, %q; want %d", code, errs, ExitNotAcquired)
	}
	_ = s.Unlock(context.Background())
}
