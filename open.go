package dlock

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/dlock-go/dlock/driver"
)

// OpenFunc opens a driver for a backend URL. Portable parameters (ttl,
// autorenew) have been removed from u's query; the rest are the driver's,
// and it must reject any it does not know (driver.Params does this).
type OpenFunc func(ctx context.Context, u *url.URL) (driver.Locker, error)

// The scheme registry is the only package-level state in dlock.
var registry = struct {
	sync.RWMutex
	m map[string]OpenFunc
}{m: map[string]OpenFunc{}}

// Register makes a backend available to Open under scheme. Backend packages
// call it from init, so that importing one (even blank) is enough. It panics
// if open is nil or scheme is already registered, as database/sql.Register
// does: two backends claiming one scheme is a programming error.
func Register(scheme string, open OpenFunc) {
	scheme = strings.ToLower(scheme)
	if open == nil {
		panic("dlock: Register of scheme " + scheme + " with a nil OpenFunc")
	}
	if scheme == "" {
		panic("dlock: Register with an empty scheme")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[scheme]; dup {
		panic("dlock: Register called twice for scheme " + scheme)
	}
	registry.m[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]string, 0, len(registry.m))
	for s := range registry.m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open connects to the backend named by rawURL's scheme, which must have
// been registered by importing its package (for example
// _ "github.com/dlock-go/dlock/backend/redis"). Parameters understood by
// every backend:
//
//	ttl=30s         default lease of Mutexes made from this Locker
//	autorenew=true  renewal watchdog on or off
//
// Anything else is the backend's; an unknown parameter is an error.
func Open(ctx context.Context, rawURL string) (Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (want e.g. mem://, redis://host:6379)", ErrInvalidURL, rawURL)
	}
	scheme := strings.ToLower(u.Scheme)
	registry.RLock()
	open := registry.m[scheme]
	registry.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w: unknown scheme %q (registered: %s; a backend registers its scheme when its package is imported)",
			ErrInvalidURL, scheme, strings.Join(Schemes(), ", "))
	}
	opts, err := portableParams(u)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("dlock: open %s: %w", scheme, err)
	}
	l, err := NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// portableParams takes ttl and autorenew out of u's query.
func portableParams(u *url.URL) ([]Option, error) {
	q := u.Query()
	var opts []Option
	only := url.Values{"ttl": q["ttl"], "autorenew": q["autorenew"]}
	p := driver.NewParams(&url.URL{RawQuery: only.Encode()})
	if _, ok := q["ttl"]; ok {
		opts = append(opts, WithTTL(p.Duration("ttl", DefaultTTL)))
	}
	if _, ok := q["autorenew"]; ok {
		opts = append(opts, WithAutoRenew(p.Bool("autorenew", true)))
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	q.Del("ttl")
	q.Del("autorenew")
	u.RawQuery = q.Encode()
	return opts, nil
}
