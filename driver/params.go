package driver

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidURL is returned for a malformed backend URL or an unknown or
// malformed URL parameter. dlock re-exports it.
var ErrInvalidURL = errors.New("dlock: invalid backend URL")

// PortableParams are the URL parameters every backend takes, read by
// dlock.Open and removed from the URL before the driver's OpenFunc sees it.
// Params lists them among the known parameters in its errors.
var PortableParams = []string{"autorenew", "maxhold", "minhold", "ttl"}

// Params reads the query parameters of a backend URL. Every getter records
// the name it was asked for; Done reports any parameter nobody asked for, so
// that a typo ("tll=5s") is an error instead of a silent default.
type Params struct {
	values url.Values
	used   map[string]bool
	err    error
}

// NewParams returns a reader over u's query parameters.
func NewParams(u *url.URL) *Params {
	return &Params{values: u.Query(), used: map[string]bool{}}
}

func (p *Params) get(name string) (string, bool) {
	p.used[name] = true
	vs, ok := p.values[name]
	if !ok {
		return "", false
	}
	if len(vs) != 1 && p.err == nil {
		p.err = fmt.Errorf("%w: parameter %q given %d times", ErrInvalidURL, name, len(vs))
	}
	return vs[0], true
}

func (p *Params) fail(name, val, want string, err error) {
	if p.err == nil {
		p.err = fmt.Errorf("%w: parameter %s=%q: want %s: %v", ErrInvalidURL, name, val, want, err)
	}
}

// String returns the parameter's value, or def when absent.
func (p *Params) String(name, def string) string {
	if v, ok := p.get(name); ok {
		return v
	}
	return def
}

// Duration parses a Go duration ("500ms", "10s"), or returns def when absent.
func (p *Params) Duration(name string, def time.Duration) time.Duration {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.fail(name, v, "a duration such as 10s", err)
		return def
	}
	return d
}

// Int parses a decimal integer, or returns def when absent.
func (p *Params) Int(name string, def int) int {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.fail(name, v, "an integer", err)
		return def
	}
	return n
}

// Float parses a decimal number, or returns def when absent.
func (p *Params) Float(name string, def float64) float64 {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		p.fail(name, v, "a number", err)
		return def
	}
	return f
}

// Bool parses true/false/1/0, or returns def when absent.
func (p *Params) Bool(name string, def bool) bool {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, "true or false", err)
		return def
	}
	return b
}

// Done returns the first parse error, or an error naming every parameter
// that no getter asked for.
func (p *Params) Done() error {
	if p.err != nil {
		return p.err
	}
	var unknown []string
	for name := range p.values {
		if !p.used[name] {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		for _, pp := range PortableParams {
			if name == pp {
				return fmt.Errorf("%w: parameter %s is read by dlock.Open; with a driver made directly, pass dlock.WithTTL or dlock.WithAutoRenew to dlock.NewLocker",
					ErrInvalidURL, name)
			}
		}
	}
	seen := map[string]bool{}
	var known []string
	for _, names := range [][]string{PortableParams, keys(p.used)} {
		for _, name := range names {
			if !seen[name] {
				seen[name] = true
				known = append(known, name)
			}
		}
	}
	sort.Strings(known)
	s := ""
	if len(unknown) > 1 {
		s = "s"
	}
	return fmt.Errorf("%w: unknown parameter%s %s (known: %s)", ErrInvalidURL, s,
		strings.Join(unknown, ", "), strings.Join(known, ", "))
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Hosts splits a URL's host part on commas ("a:1,b:2") and checks that each
// has a port, defaulting to defPort when one has none.
func Hosts(u *url.URL, defPort string) ([]string, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("%w: %s://: no host", ErrInvalidURL, u.Scheme)
	}
	var out []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, fmt.Errorf("%w: empty host in %q", ErrInvalidURL, u.Host)
		}
		if !strings.Contains(h, ":") || strings.HasSuffix(h, "]") {
			h = h + ":" + defPort
		}
		if _, port, _ := strings.Cut(h[strings.LastIndex(h, ":"):], ":"); port == "" {
			return nil, fmt.Errorf("%w: host %q has an empty port", ErrInvalidURL, h)
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("%w: host %q: bad port %q", ErrInvalidURL, h, port)
		}
		out = append(out, h)
	}
	return out, nil
}
