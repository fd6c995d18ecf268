package redis

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Each scheme builds the right go-redis client, with the hosts, database,
// TLS and options the URL gives, and with contexts honoured.
func TestNewClientFromURL(t *testing.T) {
	parse := func(raw string) goredis.UniversalClient {
		t.Helper()
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		cfg, rest, err := parseOwnParams(u)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if cfg.Prefix != "p" {
			t.Fatalf("%s: prefix %q", raw, cfg.Prefix)
		}
		c, err := newClient(rest)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	c := parse("rediss://u:pw@h1:6380/3?prefix=p&dial_timeout=2s&client_name=x")
	o := c.(*goredis.Client).Options()
	if o.Addr != "h1:6380" || o.DB != 3 || o.TLSConfig == nil || o.Username != "u" || o.Password != "pw" ||
		o.DialTimeout != 2*time.Second || o.ClientName != "x" || !o.ContextTimeoutEnabled {
		t.Fatalf("rediss:// options: %+v", o)
	}
	if o := parse("redis://h1?prefix=p").(*goredis.Client).Options(); o.Addr != "h1:6379" || o.TLSConfig != nil {
		t.Fatalf("redis:// default port or TLS: %s %v", o.Addr, o.TLSConfig)
	}

	cc := parse("rediss+cluster://h1:7000,h2,h3:7002?prefix=p&read_timeout=1s").(*goredis.ClusterClient)
	co := cc.Options()
	if !reflect.DeepEqual(co.Addrs, []string{"h1:7000", "h2:6379", "h3:7002"}) || co.TLSConfig == nil ||
		co.ReadTimeout != time.Second || !co.ContextTimeoutEnabled {
		t.Fatalf("rediss+cluster:// options: %+v", co)
	}

	fc := parse("redis+sentinel://s1,s2:26380/2?prefix=p&master_name=m")
	if _, ok := fc.(*goredis.Client); !ok {
		t.Fatalf("redis+sentinel:// gave a %T", fc)
	}

	cfg, _, err := parseOwnParams(&url.URL{RawQuery: "wait_replicas=2&wait_timeout=250ms&allow_eviction=true"})
	if err != nil || cfg.WaitReplicas != 2 || cfg.WaitTimeout != 250*time.Millisecond || !cfg.AllowEviction || cfg.Prefix != DefaultPrefix {
		t.Fatalf("own parameters: %+v %v", cfg, err)
	}
}
