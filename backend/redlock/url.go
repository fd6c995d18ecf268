package redlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// defaultPort is used for a host given without one.
const defaultPort = "6379"

func openURL(ctx context.Context, u *url.URL) (driver.Locker, error) {
	d, err := open(ctx, u)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OpenDriver returns the driver for a redlock:// URL (see the package
// documentation), for wrapping with dlock.NewLocker. Like dlock.Open, it
// fails with ErrUnavailable unless a quorum of the instances answers a
// PING before ctx ends. The portable
// parameters ttl and autorenew belong to dlock.Open and are rejected here.
// Close closes the clients it made.
func OpenDriver(ctx context.Context, rawURL string) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
	}
	if u.Scheme != Scheme {
		return nil, fmt.Errorf("%w: scheme %q, want %s://", driver.ErrInvalidURL, u.Scheme, Scheme)
	}
	return open(ctx, u)
}

func open(ctx context.Context, u *url.URL) (*Driver, error) {
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: want %s://host1:port,host2:port,host3:port, got no host part", driver.ErrInvalidURL, Scheme)
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: %s:// takes no path, got %q", driver.ErrInvalidURL, Scheme, u.Path)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("%w: %s:// takes no fragment", driver.ErrInvalidURL, Scheme)
	}
	hosts, err := driver.Hosts(u, defaultPort)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if seen[h] {
			return nil, fmt.Errorf("%w: host %s given twice (it would count twice towards the quorum)", driver.ErrInvalidURL, h)
		}
		seen[h] = true
	}
	if n := len(hosts); n < 3 || n%2 == 0 {
		return nil, fmt.Errorf("%w: Redlock needs an odd number of hosts, at least 3; got %d", driver.ErrInvalidURL, n)
	}
	p := driver.NewParams(u)
	cfg := Config{
		Prefix:  p.String("prefix", DefaultPrefix),
		Timeout: p.Duration("timeout", DefaultTimeout),
		Drift:   p.Float("drift", DefaultDrift),
	}
	db := p.Int("db", 0)
	if err := p.Done(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		return nil, fmt.Errorf("%w: prefix= is empty", driver.ErrInvalidURL)
	}
	if cfg.Timeout <= 0 {
		return nil, fmt.Errorf("%w: timeout=%v: want a positive duration", driver.ErrInvalidURL, cfg.Timeout)
	}
	if db < 0 {
		return nil, fmt.Errorf("%w: db=%d: want a database number >= 0", driver.ErrInvalidURL, db)
	}
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, fmt.Errorf("%w: %w", driver.ErrInvalidURL, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var user, pass string
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	clients := make([]*redis.Client, len(hosts))
	for i, h := range hosts {
		clients[i] = redis.NewClient(&redis.Options{
			Addr:     h,
			Username: user,
			Password: pass,
			DB:       db,
			// Requests end with their per-instance timeout.
			ContextTimeoutEnabled: true,
			// Retries belong to the Redlock loop, not to one instance:
			// a dead instance is reported at once.
			MaxRetries:    -1,
			DialerRetries: 1,
		})
	}
	d, err := NewDriver(clients, cfg)
	if err != nil {
		for _, c := range clients {
			_ = c.Close()
		}
		return nil, fmt.Errorf("%w: %w", driver.ErrInvalidURL, err)
	}
	d.owned = true
	if err := d.ping(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// ping checks that a quorum of instances answers before ctx ends (or each
// client's own read timeout runs out): a Redlock none or too few of whose
// masters answer cannot grant a lock, so Open fails with ErrUnavailable
// rather than return a Locker that cannot lock.
func (d *Driver) ping(ctx context.Context) error {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		addr string
		err  error
	}
	results := make(chan result, len(d.inst))
	for _, in := range d.inst {
		go func() { results <- result{in.addr, in.client.Ping(pctx).Err()} }()
	}
	answered := 0
	var errs []error
	for range d.inst {
		r := <-results
		if r.err == nil {
			if answered++; answered == d.quorum {
				return nil
			}
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %w", r.addr, r.err))
		if len(errs) > len(d.inst)-d.quorum {
			break
		}
	}
	return driver.Unavailable(fmt.Errorf("redlock: %d of %d instances answered, a quorum is %d: %w",
		answered, len(d.inst), d.quorum, errors.Join(errs...)))
}
