package redlock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/conformance"
)

// The invalid URLs are refused before any connection is made; Open of a
// valid one checks that a quorum answers.

func TestOpenURLInvalid(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"redlock://",                              // no host
		"redlock://a:1",                           // one instance
		"redlock://a:1,b:2",                       // even
		"redlock://a:1,b:2,c:3,d:4",               // even
		"redlock://a:1,b:2,c:3,,e:5",              // empty host
		"redlock://a:1,b:2,a:1",                   // duplicate
		"redlock://a,b,a:6379",                    // duplicate through the default port
		"redlock://a:1,b:2,c:x",                   // bad port
		"redlock://a:1,b:2,c:",                    // empty port
		"redlock://a:1,b:2,c:3/path",              // path
		"redlock://a:1,b:2,c:3#frag",              // fragment
		"redlock://a:1,b:2,c:3?tll=5s",            // unknown parameter
		"redlock://a:1,b:2,c:3?timeout=fast",      // malformed duration
		"redlock://a:1,b:2,c:3?timeout=0s",        // not positive
		"redlock://a:1,b:2,c:3?timeout=-1s",       // not positive
		"redlock://a:1,b:2,c:3?drift=x",           // malformed number
		"redlock://a:1,b:2,c:3?drift=0.001",       // below the portable layer's
		"redlock://a:1,b:2,c:3?drift=0.5",         // too large
		"redlock://a:1,b:2,c:3?db=-1",             // negative database
		"redlock://a:1,b:2,c:3?db=one",            // malformed
		"redlock://a:1,b:2,c:3?prefix=",           // empty prefix
		"redlock://a:1,b:2,c:3?prefix=a&prefix=b", // twice
		"redlock:a:1,b:2,c:3",                     // opaque
		"redlock://a:1,b:2,c:3?ttl=5s&x=1",        // portable ttl fine, x unknown
	} {
		l, err := dlock.Open(ctx, u)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded; want ErrInvalidURL", u)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", u, err)
		}
	}
}

func TestOpenURLValid(t *testing.T) {
	ctx := context.Background()
	hosts := hostsOf(t, endpoint(t))
	three, five := strings.Join(hosts[:3], ","), strings.Join(hosts, ",")
	for _, u := range []string{
		"redlock://" + three,
		"redlock://" + three + "/?prefix=app:locks:&timeout=20ms&drift=0.05&db=2",
		"redlock://" + five + "?ttl=10s&autorenew=false",
	} {
		l, err := dlock.Open(ctx, u)
		if err != nil {
			t.Errorf("Open(%q): %v", u, err)
			continue
		}
		if err := l.Close(); err != nil {
			t.Errorf("Close after Open(%q): %v", u, err)
		}
	}
}

func TestOpenDriverURL(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"redis://a:1,b:2,c:3",               // other scheme
		"redlock://a:1,b:2,c:3?ttl=5s",      // portable parameters belong to dlock.Open
		"redlock://a:1,b:2,c:3?autorenew=1", // same
		"::",
	} {
		if d, err := redlock.OpenDriver(ctx, u); !errors.Is(err, dlock.ErrInvalidURL) {
			if d != nil {
				_ = d.Close()
			}
			t.Errorf("OpenDriver(%q): %v; want ErrInvalidURL", u, err)
		}
	}
	hosts := hostsOf(t, endpoint(t))
	d, err := redlock.OpenDriver(ctx, "redlock://"+strings.Join(hosts, ",")+"?timeout=20ms")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Quorum() != 3 {
		t.Errorf("Quorum() = %d over 5 instances; want 3", d.Quorum())
	}
	st := d.Stats()
	if len(st) != 5 || st[0].Addr != hosts[0] || st[4].Addr != hosts[4] {
		t.Errorf("Stats() = %+v; want the five hosts in order", st)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := redlock.OpenDriver(cctx, "redlock://"+strings.Join(hosts[:3], ",")); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenDriver with a cancelled context: %v; want context.Canceled", err)
	}
}

// Open needs a quorum of answering instances: two of five refusing
// connections is fine, three is ErrUnavailable, and so is every instance
// hanging.
func TestOpenNeedsQuorum(t *testing.T) {
	hosts := hostsOf(t, endpoint(t))
	refused := closedPorts(t, 3)
	silent := []string{conformance.SilentServer(t), conformance.SilentServer(t), conformance.SilentServer(t)}
	for _, c := range []struct {
		hosts []string
		ok    bool
	}{
		{append(append([]string{}, hosts[:3]...), refused[:2]...), true},
		{append(append([]string{}, hosts[:2]...), refused...), false},
		{append(append([]string{}, hosts[:2]...), silent...), false},
		{silent, false},
	} {
		u := "redlock://" + strings.Join(c.hosts, ",") + "?timeout=200ms"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		l, err := dlock.Open(ctx, u)
		cancel()
		switch {
		case c.ok && err != nil:
			t.Errorf("Open(%q) with a quorum answering: %v", u, err)
		case !c.ok && err == nil:
			_ = l.Close()
			t.Errorf("Open(%q) with no quorum answering succeeded; want ErrUnavailable", u)
		case !c.ok && !errors.Is(err, dlock.ErrUnavailable):
			t.Errorf("Open(%q) with no quorum answering: %v; want ErrUnavailable", u, err)
		}
		if err == nil {
			_ = l.Close()
		}
	}
}

// closedPorts returns addresses on loopback where nothing listens.
func closedPorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		_ = ln.Close()
	}
	return out
}

func TestNewConfig(t *testing.T) {
	mk := func(addrs ...string) []*redis.Client {
		cs := make([]*redis.Client, len(addrs))
		for i, a := range addrs {
			cs[i] = redis.NewClient(&redis.Options{Addr: a})
			t.Cleanup(func() { _ = cs[i].Close() })
		}
		return cs
	}
	three := mk("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3") // nothing listens: refused at once
	bad := []struct {
		name    string
		clients []*redis.Client
		cfg     redlock.Config
	}{
		{"none", nil, redlock.Config{}},
		{"one", three[:1], redlock.Config{}},
		{"even", append(mk("127.0.0.1:4"), three...), redlock.Config{}},
		{"nil client", []*redis.Client{three[0], nil, three[2]}, redlock.Config{}},
		{"same client twice", []*redis.Client{three[0], three[1], three[0]}, redlock.Config{}},
		{"same address twice", append(three[:2:2], mk("127.0.0.1:1")...), redlock.Config{}},
		{"drift too small", three, redlock.Config{Drift: 0.001}},
		{"drift too large", three, redlock.Config{Drift: 0.9}},
		{"negative timeout", three, redlock.Config{Timeout: -time.Second}},
	}
	for _, c := range bad {
		l, err := redlock.New(c.clients, c.cfg)
		if err == nil {
			_ = l.Close()
			t.Errorf("%s: New succeeded; want ErrConfig", c.name)
			continue
		}
		if !errors.Is(err, redlock.ErrConfig) || !strings.Contains(err.Error(), "redlock") {
			t.Errorf("%s: New: %v; want ErrConfig", c.name, err)
		}
	}
	l, err := redlock.New(three, redlock.Config{}, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatalf("New with three clients: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range three { // Close left the caller's clients open
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if errors.Is(err, redis.ErrClosed) {
			t.Fatal("Close closed a client passed to New")
		}
	}
}
