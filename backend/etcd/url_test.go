package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url       string
		endpoints []string
		prefix    string
		dial      time.Duration
		user, pw  string
	}{
		{"etcd://127.0.0.1:2379", []string{"127.0.0.1:2379"}, "dlock/", etcd.DefaultDialTimeout, "", ""},
		{"etcd://localhost", []string{"localhost:2379"}, "dlock/", etcd.DefaultDialTimeout, "", ""},
		{"etcd://a:1,c,b:2/app/locks", []string{"a:1", "c:2379", "b:2"}, "app/locks/", etcd.DefaultDialTimeout, "", ""},
		{"etcd://a:1/app/locks/", []string{"a:1"}, "app/locks/", etcd.DefaultDialTimeout, "", ""},
		{"etcd://a:1//abs", []string{"a:1"}, "/abs/", etcd.DefaultDialTimeout, "", ""},
		{"etcd://a:1/?dial_timeout=250ms", []string{"a:1"}, "dlock/", 250 * time.Millisecond, "", ""},
		{"etcd://root:s3cret@a:1/p", []string{"a:1"}, "p/", etcd.DefaultDialTimeout, "root", "s3cret"},
		{"etcd://[::1]:2379/p", []string{"[::1]:2379"}, "p/", etcd.DefaultDialTimeout, "", ""},
		{"etcd://a:1/p?lease_per_hold=true", []string{"a:1"}, "p/", etcd.DefaultDialTimeout, "", ""},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", c.url, err)
		}
		cfg, prefix, err := etcd.ParseURL(u)
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if strings.Join(cfg.Endpoints, ",") != strings.Join(c.endpoints, ",") || prefix != c.prefix ||
			cfg.DialTimeout != c.dial || cfg.Username != c.user || cfg.Password != c.pw {
			t.Errorf("%s: endpoints %v prefix %q dial %v user %q/%q; want %v %q %v %q/%q", c.url,
				cfg.Endpoints, prefix, cfg.DialTimeout, cfg.Username, cfg.Password,
				c.endpoints, c.prefix, c.dial, c.user, c.pw)
		}
	}
}

// Bad URLs fail in Open before any connection is attempted: none of these
// hosts exist, so a dial would fail differently (ErrUnavailable).
func TestOpenInvalidURL(t *testing.T) {
	for _, raw := range []string{
		"etcd://",                                      // no host
		"etcd:///prefix",                               // no host
		"etcd:127.0.0.1:2379",                          // opaque
		"etcd://a:1,,b:2/p",                            // empty host
		"etcd://a:/p",                                  // empty port
		"etcd://a:99999/p",                             // port out of range
		"etcd://a:x/p",                                 // port not a number
		"etcd://a:1/p?lease_per_hold=maybe",            // not a boolean
		"etcd://a:1/p?dial_timeout=fast",               // bad duration
		"etcd://a:1/p?dial_timeout=0s",                 // not positive
		"etcd://a:1/p?dial_timeout=1s&dial_timeout=2s", // twice
		"etcd://a:1/p?tll=5s",                          // unknown parameter (typo)
		"etcd://a:1/p?endpoints=b:2",                   // unknown parameter
		"etcd://a:1/p?ttl=abc",                         // bad portable parameter
		"etcd://:pw@a:1/p",                             // password without user
		"etcd://a:1/p#frag",                            // fragment
		"etcd://a b:1/p",                               // not a URL
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
