package redis

import (
	"context"
	"fmt"
	"net/url"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/internal/redisclient"
	"github.com/dlock-go/dlock/driver"
)

// The URL schemes this package registers. A Cluster (redis+cluster://)
// and Sentinel (redis+sentinel://) have packages of their own,
// rediscluster and redissentinel, so that a program that uses neither does
// not link go-redis's clients for them.
const (
	Scheme    = "redis"  // one server: redis://host:6379/0
	SchemeTLS = "rediss" // the same over TLS
)

func init() {
	open := Opener(redisclient.Standalone)
	dlock.Register(Scheme, open)
	dlock.Register(SchemeTLS, open)
}

// Opener returns a URL opener for dlock.Register. It takes this backend's
// own parameters (prefix, wait_replicas, wait_timeout, allow_eviction) out
// of the URL, builds the go-redis client from the rest with newClient and
// checks the server(s) as New does; the Locker closes the client when it
// closes. Packages rediscluster and redissentinel register their schemes
// with it; a program may register a scheme of its own for a client it
// builds in its own way (a custom dialer, a TLS configuration), with
// dlock's portable parameters (ttl, ...) still handled by dlock.Open.
// It panics if newClient is nil, as dlock.Register does for a nil OpenFunc.
func Opener(newClient func(*url.URL) (goredis.UniversalClient, error)) dlock.OpenFunc {
	if newClient == nil {
		panic("redis: Opener with a nil client constructor")
	}
	return func(ctx context.Context, u *url.URL) (driver.Locker, error) {
		d, err := openDriver(ctx, u, newClient)
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

// openDriver connects to the server(s) u names with a client of its own.
func openDriver(ctx context.Context, u *url.URL, newClient func(*url.URL) (goredis.UniversalClient, error)) (*redisDriver, error) {
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
	for _, name := range redisclient.OwnParams() {
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
