package main_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// Help is complete: every command documents its usage and flags, run its
// exit statuses.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"lockctl run", "lockctl demo", "lockctl bench", "file:///dir", "redis://", "redlock://", "etcd://", "zk://", "consul://", "postgres://", "DLOCK_URL", "75", "76"}},
		{[]string{"help"}, []string{"lockctl run"}},
		{[]string{"help", "run"}, []string{"Usage: lockctl run", "--wait", "--ttl", "--on-lost", "--grace", "--backend", "--conflict-exit-code", "-E", "DLOCK_TOKEN", "DLOCK_KEY", "64", "69", "75", "76", "127"}},
		{[]string{"run", "--help"}, []string{"Usage: lockctl run"}},
		{[]string{"demo", "-h"}, []string{"Usage: lockctl demo", "--processes", "--no-lock", "--stock", "--workers"}},
		{[]string{"bench", "--help"}, []string{"Usage: lockctl bench", "--backend", "--duration", "--html", "--json"}},
	} {
		r := runLockctl(t, 30*time.Second, c.args...)
		if r.code != 0 {
			t.Errorf("lockctl %v: exit %d; want 0\n%s", c.args, r.code, r.stderr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("lockctl %v: help lacks %q:\n%s", c.args, w, r.stdout)
			}
		}
	}
}

// Bad flags, arguments and URLs give one clear line and a non-zero exit.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string // in the one line of stderr
	}{
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"run"}, "missing KEY"},
		{[]string{"run", "k"}, "missing COMMAND"},
		{[]string{"run", "k", "--"}, "missing COMMAND"},
		{[]string{"run", "--bogus", "k", "--", "true"}, "--bogus"},
		{[]string{"run", "k", "--ttl", "5s", "--", "true"}, "flags go before KEY"},
		{[]string{"run", "--wait", "soon", "k", "--", "true"}, "--wait"},
		{[]string{"run", "--wait", "-1s", "k", "--", "true"}, "negative"},
		{[]string{"run", "--on-lost", "hup", "k", "--", "true"}, "want term or kill"},
		{[]string{"run", "--ttl", "1ms", "--backend", "file://" + dir, "k", "--", "true"}, "TTL"},
		// --ttl given is a TTL, as WithTTL and ?ttl= are: 0 is not "the default".
		{[]string{"run", "--ttl", "0", "--backend", "file://" + dir, "k", "--", "true"}, "--ttl: dlock: invalid option: TTL must be positive, got 0s"},
		{[]string{"run", "--ttl", "-1s", "--backend", "file://" + dir, "k", "--", "true"}, "--ttl: dlock: invalid option: TTL must be positive, got -1s"},
		{[]string{"elect", "--ttl", "0", "--backend", "file://" + dir, "k", "--", "true"}, "--ttl: dlock: invalid option: TTL must be positive, got 0s"},
		{[]string{"run", "--conflict-exit-code", "256", "k", "--", "true"}, "--conflict-exit-code 256"},
		{[]string{"run", "-E", "-1", "k", "--", "true"}, "--conflict-exit-code -1"},
		{[]string{"run", "--backend", "file://" + dir, "", "--", "true"}, "empty key"},
		{[]string{"run", "--backend", "nope://x", "k", "--", "true"}, `unknown scheme "nope"`},
		{[]string{"run", "--backend", "file://otherhost/x", "k", "--", "true"}, "host"},
		{[]string{"run", "--backend", "file://" + dir + "?bogus=1", "k", "--", "true"}, "unknown parameter bogus"},
		{[]string{"run", "--backend", "redis://127.0.0.1:6379?tll=5s", "k", "--", "true"}, "tll"},
		{[]string{"run", "--backend", "etcd://127.0.0.1:notaport", "k", "--", "true"}, "invalid"},
		{[]string{"run", "--backend", "127.0.0.1:6379", "k", "--", "true"}, "invalid backend URL"},
		{[]string{"demo", "--workers", "0"}, "--workers 0"},
		{[]string{"demo", "extra"}, "unexpected argument"},
		{[]string{"demo", "--processes", "--backend", "mem://"}, "mem://"},
		{[]string{"bench"}, "--backend"},
		{[]string{"bench", "--backend", "mem://", "--duration", "-1s"}, "--duration"},
		{[]string{"bench", "--backend", "mem://", "--scenario", "nope"}, "nope"},
	} {
		r := runLockctl(t, 30*time.Second, c.args...)
		if r.code != lockctl.ExitUsage {
			t.Errorf("lockctl %q: exit %d; want %d\n%s", c.args, r.code, lockctl.ExitUsage, r.stderr)
			continue
		}
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "lockctl: ") || !strings.Contains(lines[0], c.want) {
			t.Errorf("lockctl %q: stderr %q; want one line mentioning %q", c.args, r.stderr, c.want)
		}
	}
}

// An unreachable server is a backend error (69), not "not acquired".
func TestBackendError(t *testing.T) {
	r := runLockctl(t, time.Minute, "run", "--backend", "redis://127.0.0.1:1", "--wait", "0", "k", "--", "true")
	if r.code != lockctl.ExitBackend {
		t.Fatalf("unreachable redis: exit %d; want %d\n%s", r.code, lockctl.ExitBackend, r.stderr)
	}
	if !strings.Contains(r.stderr, "unavailable") {
		t.Errorf("stderr %q; want it to say the backend is unavailable", r.stderr)
	}
}
