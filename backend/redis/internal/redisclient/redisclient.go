// Package redisclient builds the go-redis client a dlock Redis URL
// describes. Each kind of client has a function of its own, so that a
// program links go-redis's Cluster and Sentinel clients only when it
// imports the package that registers their schemes (rediscluster,
// redissentinel): a program that opens only redis:// stays as small as one
// that uses go-redis directly.
package redisclient

import (
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// Default ports of a URL host that names none.
const (
	DefaultPort         = "6379"
	DefaultSentinelPort = "26379"
)

// OwnParams are the Redis backend's own URL parameters. Every other
// parameter goes to go-redis (dial_timeout, read_timeout, pool_size,
// client_name, protocol, ...), which rejects the ones it does not know.
func OwnParams() []string {
	return []string{"prefix", "wait_replicas", "wait_timeout", "allow_eviction"}
}

// Standalone builds the client of redis:// and rediss:// (one server).
// Clients made here honour the caller's context (ContextTimeoutEnabled), as
// do the others.
func Standalone(u *url.URL) (goredis.UniversalClient, error) {
	gu, hosts, err := translate(u, DefaultPort)
	if err != nil {
		return nil, err
	}
	if len(hosts) != 1 {
		return nil, fmt.Errorf("%w: %s:// takes one host; use %s+cluster:// for a Cluster (package rediscluster)",
			driver.ErrInvalidURL, strings.ToLower(u.Scheme), gu.Scheme)
	}
	o, err := goredis.ParseURL(gu.String())
	if err != nil {
		return nil, invalid(u, err)
	}
	o.ContextTimeoutEnabled = true
	return goredis.NewClient(o), nil
}

// Cluster builds the client of redis+cluster:// and rediss+cluster://.
func Cluster(u *url.URL) (goredis.UniversalClient, error) {
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: a Cluster has no database: path %q", driver.ErrInvalidURL, u.Path)
	}
	gu, _, err := translate(u, DefaultPort)
	if err != nil {
		return nil, err
	}
	gu.Path = ""
	o, err := goredis.ParseClusterURL(gu.String())
	if err != nil {
		return nil, invalid(u, err)
	}
	o.ContextTimeoutEnabled = true
	return goredis.NewClusterClient(o), nil
}

// Sentinel builds the client of redis+sentinel:// and rediss+sentinel://:
// the hosts are Sentinels, master_name= names the primary they watch.
func Sentinel(u *url.URL) (goredis.UniversalClient, error) {
	gu, _, err := translate(u, DefaultSentinelPort)
	if err != nil {
		return nil, err
	}
	o, err := goredis.ParseFailoverURL(gu.String())
	if err != nil {
		return nil, invalid(u, err)
	}
	if o.MasterName == "" {
		return nil, fmt.Errorf("%w: %s:// needs master_name=", driver.ErrInvalidURL, strings.ToLower(u.Scheme))
	}
	o.ContextTimeoutEnabled = true
	return goredis.NewFailoverClient(o), nil
}

// translate checks u and returns the URL go-redis parses for it, with the
// base scheme (redis or rediss), the first host in the URL and the others
// as addr=, and the hosts.
func translate(u *url.URL, defaultPort string) (url.URL, []string, error) {
	scheme := strings.ToLower(u.Scheme)
	base, _, _ := strings.Cut(scheme, "+")
	if u.Opaque != "" || u.Fragment != "" {
		return url.URL{}, nil, fmt.Errorf("%w: %s: want %s://host:port[/db][?params]", driver.ErrInvalidURL, u.Redacted(), scheme)
	}
	hosts, err := driver.Hosts(u, defaultPort)
	if err != nil {
		return url.URL{}, nil, err
	}
	q := u.Query()
	if _, ok := q["addr"]; ok {
		return url.URL{}, nil, fmt.Errorf("%w: list hosts in the URL (h1:p1,h2:p2), not as addr=", driver.ErrInvalidURL)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	return url.URL{Scheme: base, User: u.User, Host: hosts[0], Path: u.Path, RawQuery: q.Encode()}, hosts, nil
}

func invalid(u *url.URL, err error) error {
	return fmt.Errorf("%w: %s: %v (known parameters: %s, %s, and go-redis's own, such as dial_timeout, read_timeout, pool_size)",
		driver.ErrInvalidURL, u.Redacted(), err, strings.Join(driver.PortableParams, ", "), strings.Join(OwnParams(), ", "))
}
