package dlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// OpenFunc opens a driver for a backend URL. Portable parameters (ttl,
// autorenew, minhold, maxhold) have been removed from u's query; the rest
// are the driver's, and it must reject any it does not know (driver.Params
// does this).
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
//	minhold=1m      minimum duration of every hold (WithMinHold)
//	maxhold=10m     maximum duration of every hold (WithMaxHold)
//
// Anything else is the backend's; an unknown parameter is an error whose
// message lists every parameter the URL may carry. Every error Open returns
// reads "dlock: open SCHEME: ..." (a malformed URL or unknown scheme: the
// reason alone) and matches, with errors.Is:
//
//   - ErrInvalidURL for a malformed URL, an unknown scheme, or an unknown or
//     malformed parameter; a parameter whose value is out of range (ttl=0,
//     a TTL outside the backend's limits) matches ErrInvalidOption too;
//   - ErrUnavailable when no server (for a quorum backend such as Redlock,
//     not a quorum) answered before ctx ended or the backend's own dial
//     timeout ran out: Open fails rather than return a Locker that cannot
//     lock;
//   - ctx's error when ctx had ended, as well.
//
// opts set the defaults of every Mutex made from the Locker, as NewLocker's
// do (WithObserver, WithLogger, WithTTL, ...); the URL's ttl, autorenew,
// minhold and maxhold parameters, when given, win over them.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Locker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, err)
	}
	if u.Scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (want e.g. mem://, redis://host:6379)", ErrInvalidURL, rawURL)
	}
	scheme := strings.ToLower(u.Scheme)
	open, err := opener(scheme, rawURL)
	if err != nil {
		return nil, err
	}
	params, err := portableParams(u)
	if err != nil {
		return nil, &openError{scheme, err}
	}
	if err := ctx.Err(); err != nil {
		return nil, &openError{scheme, err}
	}
	d, err := open(ctx, u)
	if err != nil {
		return nil, &openError{scheme, err}
	}
	named := func(o *options) { o.backend = scheme }
	l, err := NewLocker(d, append(append([]Option{named}, opts...), params...)...)
	if err != nil {
		_ = d.Close()
		if errors.Is(err, ErrInvalidOption) {
			err = fmt.Errorf("%w: %w", ErrInvalidURL, err)
		}
		return nil, &openError{scheme, err}
	}
	return l, nil
}

// openError is an error of Open: "dlock: open SCHEME: ..." with the cause in
// the chain, naming dlock once however many layers added the prefix.
type openError struct {
	scheme string
	err    error
}

func (e *openError) Error() string {
	return "dlock: open " + e.scheme + ": " + dropPrefix(e.err.Error())
}

// dropPrefix removes every "dlock: " that starts a word ("redlock: " stays).
func dropPrefix(s string) string {
	const p = "dlock: "
	var b strings.Builder
	for {
		i := strings.Index(s, p)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		if i > 0 && isWordByte(s[i-1]) {
			b.WriteString(s[:i+len(p)])
		} else {
			b.WriteString(s[:i])
		}
		s = s[i+len(p):]
	}
}

func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func (e *openError) Unwrap() error { return e.err }

// portableParams takes ttl, autorenew, minhold and maxhold out of u's
// query.
func portableParams(u *url.URL) ([]Option, error) {
	q := u.Query()
	var opts []Option
	only := url.Values{"ttl": q["ttl"], "autorenew": q["autorenew"], "minhold": q["minhold"], "maxhold": q["maxhold"]}
	p := driver.NewParams(&url.URL{RawQuery: only.Encode()})
	if _, ok := q["ttl"]; ok {
		if v := q.Get("ttl"); beyondDuration(v) {
			return nil, fmt.Errorf("%w: %w: ttl=%s is above dlock's maximum of %v (dlock.MaxTTL, 10 years)",
				ErrInvalidURL, ErrInvalidOption, v, MaxTTL)
		}
		opts = append(opts, WithTTL(p.Duration("ttl", DefaultTTL)))
	}
	if _, ok := q["autorenew"]; ok {
		opts = append(opts, WithAutoRenew(p.Bool("autorenew", true)))
	}
	for _, hp := range []struct {
		name string
		opt  func(time.Duration) Option
	}{{"minhold", WithMinHold}, {"maxhold", WithMaxHold}} {
		if _, ok := q[hp.name]; !ok {
			continue
		}
		if v := q.Get(hp.name); beyondDuration(v) {
			return nil, fmt.Errorf("%w: %w: %s=%s is above dlock's maximum of %v (dlock.MaxTTL, 10 years)",
				ErrInvalidURL, ErrInvalidOption, hp.name, v, MaxTTL)
		}
		opts = append(opts, hp.opt(p.Duration(hp.name, 0)))
	}
	if err := p.Done(); err != nil {
		return nil, err
	}
	q.Del("ttl")
	q.Del("autorenew")
	q.Del("minhold")
	q.Del("maxhold")
	u.RawQuery = q.Encode()
	return opts, nil
}

// durationSyntax is a positive duration as time.ParseDuration reads it.
var durationSyntax = regexp.MustCompile(`^\+?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// beyondDuration reports whether v is a well-formed positive duration too
// long for a time.Duration (ttl=1000000000h), which is a TTL above MaxTTL,
// not a malformed one.
func beyondDuration(v string) bool {
	if !durationSyntax.MatchString(v) {
		return false
	}
	_, err := time.ParseDuration(v)
	return err != nil
}

// schemePackages names, for every URL scheme this project ships, the
// package (under github.com/dlock-go/dlock/) whose import registers it.
// It is one of the tables that list the backends: a test in the tools
// module fails when it and dlock.Schemes(), with every backend imported,
// disagree (see docs/adding-a-backend.md).
var schemePackages = map[string]string{
	"mem":             "backend/memory",
	"file":            "backend/file",
	"redis":           "backend/redis",
	"rediss":          "backend/redis",
	"redis+cluster":   "backend/redis/rediscluster",
	"rediss+cluster":  "backend/redis/rediscluster",
	"redis+sentinel":  "backend/redis/redissentinel",
	"rediss+sentinel": "backend/redis/redissentinel",
	"redlock":         "backend/redlock",
	"etcd":            "backend/etcd",
	"zk":              "backend/zookeeper",
	"consul":          "backend/consul",
	"postgres":        "backend/postgres",
	"postgresql":      "backend/postgres",
}

// packageOf names the package of this project that registers scheme, for
// the error of an Open whose program did not import it; "" for a scheme
// this project does not ship.
func packageOf(scheme string) string {
	if pkg, ok := schemePackages[scheme]; ok {
		return "github.com/dlock-go/dlock/" + pkg
	}
	return ""
}
