package consul

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// open is the OpenFunc registered for consul://.
func open(ctx context.Context, u *url.URL) (driver.Locker, error) {
	cfg, c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	d, err := newOwnedDriver(cfg, c)
	if err != nil {
		return nil, err
	}
	if err := d.ping(ctx); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// parseURL reads consul://host:port/prefix?lockdelay=15s&monitors=64 into a
// client configuration (api.DefaultConfig, so the CONSUL_* environment
// variables apply, with the URL's address) and the driver's settings.
func parseURL(u *url.URL) (*api.Config, config, error) {
	c := defaultConfig()
	if u.Opaque != "" {
		return nil, c, fmt.Errorf("%w: consul URL %q: want consul://host:port/prefix", driver.ErrInvalidURL, u.Redacted())
	}
	if u.User != nil {
		return nil, c, fmt.Errorf("%w: consul URL: credentials in the URL are not accepted; set the ACL token in CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE)",
			driver.ErrInvalidURL)
	}
	if u.Fragment != "" {
		return nil, c, fmt.Errorf("%w: consul URL: unexpected fragment #%s", driver.ErrInvalidURL, u.Fragment)
	}
	q := u.Query()
	if q.Has("token") {
		return nil, c, fmt.Errorf("%w: consul URL: token= is not accepted (URLs end up in logs); set CONSUL_HTTP_TOKEN (or CONSUL_HTTP_TOKEN_FILE)",
			driver.ErrInvalidURL)
	}
	cfg := api.DefaultConfig()
	if u.Host != "" {
		hosts, err := driver.Hosts(u, "8500")
		if err != nil {
			return nil, c, err
		}
		if len(hosts) != 1 {
			return nil, c, fmt.Errorf("%w: consul URL: one agent address, got %d (%s); a Consul agent forwards to the servers itself",
				driver.ErrInvalidURL, len(hosts), u.Host)
		}
		cfg.Address = hosts[0]
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		c.prefix = p
	}
	p := driver.NewParams(u)
	c.lockDelay = p.Duration("lockdelay", c.lockDelay)
	c.monitors = p.Int("monitors", c.monitors)
	c.sessionPerHold = p.Bool("session_per_hold", c.sessionPerHold)
	if err := p.Done(); err != nil {
		return nil, c, err
	}
	if err := c.validate(); err != nil {
		return nil, c, fmt.Errorf("%w: %w", driver.ErrInvalidURL, err)
	}
	return cfg, c, nil
}

// ping checks that the agent answers and has a leader.
func (d *consulDriver) ping(ctx context.Context) error {
	leader, err := d.c.Status().LeaderWithQueryOptions(d.qopts(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return driver.Unavailable(fmt.Errorf("consul: no answer from %s: %w", d.addr, ctx.Err()))
		}
		return mapErr(ctx, "status", err)
	}
	if leader == "" {
		return driver.Unavailable(fmt.Errorf("consul: agent %s knows no leader", d.addr))
	}
	return nil
}
