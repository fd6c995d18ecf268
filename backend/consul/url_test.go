package consul

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, raw := range []string{
		"consul://user:secret@127.0.0.1:8500",
		"consul://:secret@127.0.0.1:8500",
		"consul://127.0.0.1:8500?token=secret",
		"consul://127.0.0.1:8500?bogus=1",
		"consul://127.0.0.1:8500?lockdelay=soon",
		"consul://127.0.0.1:8500?lockdelay=-1s",
		"consul://127.0.0.1:8500?lockdelay=61s",
		"consul://127.0.0.1:8500?lockdelay=1s&lockdelay=2s",
		"consul://127.0.0.1:8500?monitors=-1",
		"consul://127.0.0.1:8500?monitors=many",
		"consul://127.0.0.1:8500?session_per_hold=maybe",
		"consul://127.0.0.1:8500?ttl=ten",
		"consul://127.0.0.1:8500,127.0.0.2:8500",
		"consul://127.0.0.1:/p",
		"consul://127.0.0.1:99999/p",
		"consul://127.0.0.1:port/p",
		"consul://127.0.0.1:8500/a//b",
		"consul://127.0.0.1:8500/a/../b",
		"consul://127.0.0.1:8500/a%20b",
		"consul://127.0.0.1:8500/%D0%BA%D0%BB",
		"consul://127.0.0.1:8500/p#frag",
		"consul:127.0.0.1:8500",
		"consul://[::1",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := dlock.Open(ctx, raw)
		cancel()
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded; want ErrInvalidURL", raw)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", raw, err)
		}
	}
}

func TestParseURL(t *testing.T) {
	t.Setenv("CONSUL_HTTP_ADDR", "10.1.2.3:8501")
	for _, c := range []struct {
		raw       string
		addr      string
		prefix    string
		lockDelay time.Duration
		monitors  int
		perHold   bool
	}{
		{"consul://127.0.0.1:8500", "127.0.0.1:8500", DefaultPrefix, DefaultLockDelay, DefaultMonitors, false},
		{"consul://127.0.0.1/", "127.0.0.1:8500", DefaultPrefix, DefaultLockDelay, DefaultMonitors, false},
		{"consul://localhost:18500/app/locks/?lockdelay=0s&monitors=0", "localhost:18500", "app/locks", 0, 0, false},
		{"consul:///svc.v1?lockdelay=250ms", "10.1.2.3:8501", "svc.v1", 250 * time.Millisecond, DefaultMonitors, false},
		{"consul://[::1]:8500/x?session_per_hold=true", "[::1]:8500", "x", DefaultLockDelay, DefaultMonitors, true},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		cfg, got, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%q): %v", c.raw, err)
			continue
		}
		if cfg.Address != c.addr || got.prefix != c.prefix || got.lockDelay != c.lockDelay || got.monitors != c.monitors ||
			got.sessionPerHold != c.perHold {
			t.Errorf("parseURL(%q) = address %q prefix %q lockdelay %v monitors %d session_per_hold %v; want %q %q %v %d %v",
				c.raw, cfg.Address, got.prefix, got.lockDelay, got.monitors, got.sessionPerHold,
				c.addr, c.prefix, c.lockDelay, c.monitors, c.perHold)
		}
	}
}

func TestOptionsValidated(t *testing.T) {
	for name, cfg := range map[string]Config{
		"prefix":    {Prefix: "a//b"},
		"lockdelay": {LockDelay: 2 * time.Minute},
	} {
		if _, err := NewFromConfig(nil, cfg); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("NewFromConfig with a bad %s: %v; want ErrInvalidOption", name, err)
		}
	}
	if _, err := New(nil, Config{}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("New(nil): %v; want ErrInvalidOption", err)
	}
	// Zero means the default, a negative value turns the feature off.
	for _, c := range []struct {
		cfg       Config
		lockDelay time.Duration
		monitors  int
	}{
		{Config{}, DefaultLockDelay, DefaultMonitors},
		{Config{LockDelay: -1, Monitors: -1}, 0, 0},
		{Config{LockDelay: time.Second, Monitors: 3}, time.Second, 3},
	} {
		if got := c.cfg.resolve(); got.lockDelay != c.lockDelay || got.monitors != c.monitors || got.prefix != DefaultPrefix {
			t.Errorf("%+v resolves to %+v; want lock-delay %v, monitors %d, prefix %q", c.cfg, got, c.lockDelay, c.monitors, DefaultPrefix)
		}
	}
}
