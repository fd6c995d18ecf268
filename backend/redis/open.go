package redis

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// The URL schemes this package registers.
const (
	Scheme              = "redis"          // one server: redis://host:6379/0
	SchemeTLS           = "rediss"         // the same over TLS
	SchemeCluster       = "redis+cluster"  // a Cluster: redis+cluster://h1:7000,h2:7001
	SchemeClusterTLS    = "rediss+cluster" // the same over TLS
	SchemeSentinel      = "redis+sentinel" // Sentinel: redis+sentinel://s1:26379,s2:26379/0?master_name=mymaster
	SchemeSentinelTLS   = "rediss+sentinel"
	defaultPort         = "6379"
	defaultSentinelPort = "26379"
)

func init() {
	for _, s := range []string{Scheme, SchemeTLS, SchemeCluster, SchemeClusterTLS, SchemeSentinel, SchemeSentinelTLS} {
		dlock.Register(s, open)
	}
}

// The backend's own URL parameters; every other parameter goes to go-redis
// (dial_timeout, read_timeout, pool_size, client_name, protocol, ...), which
// rejects the ones it does not know.
var ownParams = []string{"prefix", "wait_replicas", "wait_timeout", "allow_eviction"}

func open(ctx context.Context, u *url.URL) (driver.Locker, error) {
	d, err := openDriver(ctx, u)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openDriver connects to the server(s) u names with a client of its own.
func openDriver(ctx context.Context, u *url.URL) (*redisDriver, error) {
	cfg, rest, err := parseOwnParams(u)
	if err != nil {
		return nil, err
	}
	client, err := newClient(rest)
	if err != nil {
		return nil, err
	}
	d, err := newDriver(ctx, client, cfg, true)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return d, nil
}

// parseOwnParams takes this backend's parameters out of u and returns the
// URL that is left for go-redis.
func parseOwnParams(u *url.URL) (Config, *url.URL, error) {
	q := u.Query()
	mine := url.Values{}
	for _, name := range ownParams {
		if vs, ok := q[name]; ok {
			mine[name] = vs
			q.Del(name)
		}
	}
	p := driver.NewParams(&url.URL{RawQuery: mine.Encode()})
	o := Config{
		Prefix:        p.String("prefix", DefaultPrefix),
		WaitReplicas:  p.Int("wait_replicas", 0),
		WaitTimeout:   p.Duration("wait_timeout", DefaultWaitTimeout),
		AllowEviction: p.Bool("allow_eviction", false),
	}
	if err := p.Done(); err != nil {
		return o, nil, err
	}
	if _, ok := mine["prefix"]; ok && o.Prefix == "" {
		return o, nil, fmt.Errorf("%w: prefix is empty", driver.ErrInvalidURL)
	}
	if o.WaitReplicas < 0 {
		return o, nil, fmt.Errorf("%w: wait_replicas=%d: want 0 or more", driver.ErrInvalidURL, o.WaitReplicas)
	}
	if o.WaitTimeout <= 0 {
		return o, nil, fmt.Errorf("%w: wait_timeout=%v: want a positive duration", driver.ErrInvalidURL, o.WaitTimeout)
	}
	if _, ok := mine["wait_timeout"]; ok && o.WaitReplicas == 0 {
		return o, nil, fmt.Errorf("%w: wait_timeout without wait_replicas", driver.ErrInvalidURL)
	}
	o, err := o.normalize()
	if err != nil {
		return o, nil, fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
	}
	rest := *u
	rest.RawQuery = q.Encode()
	return o, &rest, nil
}

// newClient builds the go-redis client a URL describes. Clients made here
// honour the caller's context (ContextTimeoutEnabled).
func newClient(u *url.URL) (goredis.UniversalClient, error) {
	scheme := strings.ToLower(u.Scheme)
	base, kind, _ := strings.Cut(scheme, "+")
	if u.Opaque != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %s: want %s://host:port[/db][?params]", driver.ErrInvalidURL, u.Redacted(), scheme)
	}
	port := defaultPort
	if kind == "sentinel" {
		port = defaultSentinelPort
	}
	hosts, err := driver.Hosts(u, port)
	if err != nil {
		return nil, err
	}
	// go-redis takes one host in the URL and the others as addr=.
	q := u.Query()
	if _, ok := q["addr"]; ok {
		return nil, fmt.Errorf("%w: list hosts in the URL (h1:p1,h2:p2), not as addr=", driver.ErrInvalidURL)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	gu := url.URL{Scheme: base, User: u.User, Host: hosts[0], Path: u.Path, RawQuery: q.Encode()}
	invalid := func(err error) error {
		return fmt.Errorf("%w: %s: %v (parameters: dlock's %s; this backend's %s; any other is go-redis's, such as dial_timeout, read_timeout, pool_size)",
			driver.ErrInvalidURL, u.Redacted(), err, strings.Join(driver.PortableParams, ", "), strings.Join(ownParams, ", "))
	}
	switch kind {
	case "":
		if len(hosts) != 1 {
			return nil, fmt.Errorf("%w: %s:// takes one host; use %s:// for a Cluster", driver.ErrInvalidURL, scheme, base+"+cluster")
		}
		o, err := goredis.ParseURL(gu.String())
		if err != nil {
			return nil, invalid(err)
		}
		o.ContextTimeoutEnabled = true
		return goredis.NewClient(o), nil
	case "cluster":
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("%w: a Cluster has no database: path %q", driver.ErrInvalidURL, u.Path)
		}
		gu.Path = ""
		o, err := goredis.ParseClusterURL(gu.String())
		if err != nil {
			return nil, invalid(err)
		}
		o.ContextTimeoutEnabled = true
		return goredis.NewClusterClient(o), nil
	case "sentinel":
		o, err := goredis.ParseFailoverURL(gu.String())
		if err != nil {
			return nil, invalid(err)
		}
		if o.MasterName == "" {
			return nil, fmt.Errorf("%w: %s:// needs master_name=", driver.ErrInvalidURL, scheme)
		}
		o.ContextTimeoutEnabled = true
		return goredis.NewFailoverClient(o), nil
	}
	return nil, fmt.Errorf("%w: unknown scheme %q", driver.ErrInvalidURL, scheme)
}
