package consul

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Inspector = (*consulDriver)(nil)

// Inspect reads key's KV entry (held when a session has it locked: token =
// its ModifyIndex, description = its value) and that session's TTL.
// Consul does not tell when a session was last renewed, so Remaining is
// the session's TTL, the validity a renewal grants (Consul may keep an
// unrenewed session up to twice that). Waiters is -1: Consul keeps no
// queue. It changes nothing.
func (d *consulDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	info, _, err := d.inspect(ctx, key)
	return info, err
}

// Break deletes key's KV entry, guarded by the ModifyIndex it was read at
// (delete-cas), whoever holds it. The holder's session is left alone:
// destroying it would start a lock-delay and keep the next holder out.
// The holder's monitor (or, for an unmonitored hold, its next renewal)
// sees the key gone and closes its Done with ErrLockLost; the next lock
// writes a higher ModifyIndex.
func (d *consulDriver) Break(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	path := d.path(key)
	for {
		info, kv, err := d.inspect(ctx, key)
		if err != nil || !info.Held {
			return info, err
		}
		ok, _, err := d.c.KV().DeleteCAS(&api.KVPair{Key: path, ModifyIndex: kv.ModifyIndex}, d.wopts(ctx))
		if err != nil {
			return driver.Info{}, mapErr(ctx, "break", err)
		}
		if ok {
			return info, nil
		}
		// Released or taken meanwhile: look again.
		if err := ctx.Err(); err != nil {
			return driver.Info{}, err
		}
	}
}

func (d *consulDriver) inspect(ctx context.Context, key string) (driver.Info, *api.KVPair, error) {
	kv, _, err := d.c.KV().Get(d.path(key), d.qopts(ctx))
	if err != nil {
		return driver.Info{}, nil, mapErr(ctx, "inspect", err)
	}
	if kv == nil || kv.Session == "" {
		return driver.Info{Waiters: -1}, nil, nil
	}
	info := driver.Info{Held: true, Token: kv.ModifyIndex, Meta: string(kv.Value), Waiters: -1}
	se, _, err := d.c.Session().Info(kv.Session, d.qopts(ctx))
	if err != nil {
		return driver.Info{}, nil, mapErr(ctx, "inspect", err)
	}
	if se != nil && se.TTL != "" {
		ttl, err := time.ParseDuration(se.TTL)
		if err != nil {
			return driver.Info{}, nil, driver.Unavailable(fmt.Errorf("consul: session %s has TTL %q: %w", kv.Session, se.TTL, err))
		}
		info.Remaining = ttl
	}
	return info, kv, nil
}
