// Package redisfence is fence's checker for resources stored in Redis: the
// fencing check, the raise of the fence and the operation run in one Lua
// script (fence.lua, embedded), so a holder paused past its lease cannot
// write after a newer holder has been there.
//
// It lives beside the Redis backend, in the root module, so that fencing in
// Redis costs a program nothing beyond go-redis, which the Redis backend
// already needs. The rule is package fence's; errors are fence's
// (fence.ErrStale, *fence.StaleError, fence.ErrNotFound, ...).
package redisfence

import (
	_ "embed"

	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// DefaultPrefix is the key prefix of fences when New is given an empty one.
const DefaultPrefix = "dlock:fence:"

//go:embed fence.lua
var fenceLua string

var fenceScript = redis.NewScript(fenceLua)

// Checker fences values stored in Redis. Each resource is one hash, at the
// prefix followed by the resource key, with two fields:
//
//	fence  the highest token seen, as 20 zero-padded decimal digits
//	value  the value
//
// Get, Set and Delete are each one Lua script call (fence.lua, embedded), so
// the check, the raise and the operation are atomic. Get raises the fence
// too: after a holder has read the value, no older holder can write it. The
// hash has no expiry and must not get one; a fence that disappears lets a
// stale holder through. Being one key, it works unchanged on Redis Cluster.
//
// Tokens are full uint64 values; the script compares them exactly (see
// redis.lua). A Redis that loses writes (failover to a replica that had
// not received them, restart without persistence) can lose a fence too:
// fence with a store at least as durable as the resource, which here is
// the same store.
type Checker struct {
	c      redis.UniversalClient
	prefix string
}

// New returns a checker storing fences and values under prefix
// (DefaultPrefix if empty) on c. The client stays the caller's: the checker
// never closes it.
func New(c redis.UniversalClient, prefix string) (*Checker, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redisfence.New with a nil client", fence.ErrInvalid)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Checker{c: c, prefix: prefix}, nil
}

// Key returns the Redis key of resource's hash.
func (r *Checker) Key(resource string) string { return r.prefix + resource }

// Set stores value for resource if token is accepted.
func (r *Checker) Set(ctx context.Context, resource string, token dlock.Token, value string) error {
	_, err := r.run(ctx, "set", resource, token, value)
	return err
}

// Get returns resource's value if token is accepted, raising the fence. It
// returns ErrNotFound when the token is accepted but no value is stored.
func (r *Checker) Get(ctx context.Context, resource string, token dlock.Token) (string, error) {
	return r.run(ctx, "get", resource, token, "")
}

// Delete removes resource's value if token is accepted. The fence stays.
func (r *Checker) Delete(ctx context.Context, resource string, token dlock.Token) error {
	_, err := r.run(ctx, "del", resource, token, "")
	return err
}

// Highest returns the highest token seen for resource, 0 if none.
func (r *Checker) Highest(ctx context.Context, resource string) (dlock.Token, error) {
	if err := fence.CheckResource(resource); err != nil {
		return 0, err
	}
	s, err := r.c.HGet(ctx, r.Key(resource), "fence").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fence: redis: read fence of %q: %w", resource, err)
	}
	return fence.DecodeToken(s)
}

func (r *Checker) run(ctx context.Context, op, resource string, token dlock.Token, value string) (string, error) {
	if err := fence.CheckArgs(resource, token); err != nil {
		return "", err
	}
	res, err := fenceScript.Run(ctx, r.c, []string{r.Key(resource)}, op, fence.EncodeToken(token), value).Slice()
	if err != nil {
		return "", fmt.Errorf("fence: redis: fenced %s of %q: %w", op, resource, err)
	}
	if len(res) == 0 {
		return "", fmt.Errorf("fence: redis: fenced %s of %q: empty reply", op, resource)
	}
	code, _ := res[0].(int64)
	switch code {
	case 1:
		if len(res) > 1 {
			v, _ := res[1].(string)
			return v, nil
		}
		return "", nil
	case 2:
		return "", fmt.Errorf("%w: no value stored for %q", fence.ErrNotFound, resource)
	case 0:
		if len(res) > 1 {
			s, _ := res[1].(string)
			if h, err := fence.DecodeToken(s); err == nil {
				return "", &fence.StaleError{Resource: resource, Token: token, Highest: h}
			}
		}
	}
	return "", fmt.Errorf("fence: redis: fenced %s of %q: unexpected reply %v", op, resource, res)
}
