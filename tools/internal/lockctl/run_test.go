package lockctl

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"
)

func testIO(env map[string]string) (IO, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return IO{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] },
	}, &out, &errb
}

func TestParseRun(t *testing.T) {
	sys, _, _ := testIO(map[string]string{"DLOCK_URL": "etcd://10.0.0.1:2379"})
	cfg, _, ok := parseRun([]string{"--ttl", "5s", "--wait", "10s", "--on-lost", "kill", "--grace", "2s", "-v", "job", "--", "sh", "-c", "x"}, sys)
	if !ok {
		t.Fatal("parseRun failed")
	}
	want := runConfig{url: "etcd://10.0.0.1:2379", key: "job", ttl: 5 * time.Second, wait: 10 * time.Second,
		onLost: syscall.SIGKILL, grace: 2 * time.Second, verbose: true}
	if cfg.url != want.url || cfg.key != want.key || cfg.ttl != want.ttl || cfg.wait != want.wait ||
		cfg.onLost != want.onLost || cfg.grace != want.grace || !cfg.verbose || strings.Join(cfg.argv, " ") != "sh -c x" {
		t.Fatalf("parseRun = %+v", cfg)
	}

	// Defaults: wait forever, SIGTERM, grace TTL/20, file:// without DLOCK_URL.
	sys, _, _ = testIO(nil)
	cfg, _, ok = parseRun([]string{"job", "true"}, sys)
	if !ok || cfg.url != "file://" || cfg.wait >= 0 || cfg.onLost != syscall.SIGTERM || cfg.grace >= 0 || cfg.argv[0] != "true" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg.conflictExit != ExitNotAcquired || cfg.ttlSet || cfg.ttl != 0 {
		t.Fatalf("defaults: conflict exit %d, TTL %v given %v; want %d and the URL's TTL", cfg.conflictExit, cfg.ttl, cfg.ttlSet, ExitNotAcquired)
	}
	for _, args := range [][]string{{"-E", "0"}, {"--conflict-exit-code=0"}, {"-n", "-E=0"}} {
		cfg, _, ok = parseRun(append(args, "job", "--", "true"), sys)
		if !ok || cfg.conflictExit != 0 {
			t.Errorf("%q: conflict exit %d, ok %v; want 0", args, cfg.conflictExit, ok)
		}
	}
	for args, wait := range map[string]time.Duration{"-n": 0, "--wait=0": 0, "--wait=5": 5 * time.Second, "--wait=forever": -1} {
		cfg, _, ok = parseRun([]string{args, "job", "--", "true"}, sys)
		if !ok || cfg.wait != wait {
			t.Errorf("%s: wait %v; want %v", args, cfg.wait, wait)
		}
	}
	// A flag's value that is "--" is not the separator.
	cfg, _, ok = parseRun([]string{"--backend", "mem://", "k", "--", "echo", "--", "x"}, sys)
	if !ok || strings.Join(cfg.argv, " ") != "echo -- x" {
		t.Fatalf("argv %q; want the command's own -- kept", cfg.argv)
	}
}

func TestLongFlags(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -bogus":         "flag provided but not defined: --bogus",
		`invalid value "x" for flag -wait: want`:        `invalid value "x" for flag --wait: want`,
		"flag provided but not defined: -x":             "flag provided but not defined: -x",
		`invalid boolean value "q" for -n: parse error`: `invalid boolean value "q" for -n: parse error`,
	} {
		if got := longFlags(in); got != want {
			t.Errorf("longFlags(%q) = %q; want %q", in, got, want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"mem://":                         "mem://",
		"mem://shop":                     "mem://shop",
		"file:///var/lock/x":             "file:///var/lock/x",
		"redis://:secret@127.0.0.1:6379": "redis://:xxxxx@127.0.0.1:6379",
		"etcd://127.0.0.1:2379?ttl=5s":   "etcd://127.0.0.1:2379?ttl=5s",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q; want %q", in, got, want)
		}
	}
	if got := redact("file://"); !strings.HasPrefix(got, "file:///") {
		t.Errorf("redact(file://) = %q; want the default directory", got)
	}
}

func TestParseRunPermits(t *testing.T) {
	sys, _, _ := testIO(nil)
	cfg, _, ok := parseRun([]string{"--permits", "3", "job", "--", "true"}, sys)
	if !ok || cfg.permits != 3 {
		t.Fatalf("--permits 3: %+v, ok %v", cfg, ok)
	}
	if cfg, _, ok = parseRun([]string{"job", "--", "true"}, sys); !ok || cfg.permits != 0 {
		t.Fatalf("no --permits: %+v; want a plain lock", cfg)
	}
	for _, n := range []string{"0", "-1", "x"} {
		sys, _, errb := testIO(nil)
		if _, code, ok := parseRun([]string{"--permits", n, "job", "--", "true"}, sys); ok || code != ExitUsage {
			t.Errorf("--permits %s: ok %v, code %d; want usage error %d (%s)", n, ok, code, ExitUsage, errb)
		}
	}
}

func TestParseElect(t *testing.T) {
	sys, _, _ := testIO(map[string]string{"DLOCK_URL": "etcd://10.0.0.1:2379"})
	cfg, _, ok := parseElect([]string{"--ttl", "5s", "--value", "web-1", "--wait", "10s", "--on-lost", "kill", "-v", "scheduler", "--", "sh", "-c", "x"}, sys)
	if !ok {
		t.Fatal("parseElect failed")
	}
	if cfg.url != "etcd://10.0.0.1:2379" || cfg.key != "scheduler" || cfg.value != "web-1" || cfg.ttl != 5*time.Second ||
		cfg.wait != 10*time.Second || cfg.onLost != syscall.SIGKILL || !cfg.verbose || !cfg.elect || strings.Join(cfg.argv, " ") != "sh -c x" {
		t.Fatalf("parseElect = %+v", cfg)
	}
	cfg, _, ok = parseElect([]string{"scheduler", "true"}, sys)
	if !ok || cfg.wait >= 0 || !strings.HasPrefix(cfg.value, "host=") || cfg.noun() != "leadership of" {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestParseRunReaders(t *testing.T) {
	sys, _, _ := testIO(nil)
	cfg, _, ok := parseRun([]string{"--readers", "4", "--read", "job", "--", "true"}, sys)
	if !ok || cfg.readers != 4 || !cfg.read {
		t.Fatalf("--readers 4 --read: %+v, ok %v", cfg, ok)
	}
	if cfg, _, ok = parseRun([]string{"--readers", "4", "job", "--", "true"}, sys); !ok || cfg.readers != 4 || cfg.read {
		t.Fatalf("--readers 4: %+v; want the writer", cfg)
	}
	for _, args := range [][]string{
		{"--readers", "0"}, {"--readers", "-1"}, {"--readers", "x"},
		{"--read"},
		{"--readers", "2", "--permits", "2"},
	} {
		sys, _, errb := testIO(nil)
		if _, code, ok := parseRun(append(args, "job", "--", "true"), sys); ok || code != ExitUsage {
			t.Errorf("%v: ok %v, code %d; want usage error %d (%s)", args, ok, code, ExitUsage, errb)
		}
	}
}
