package fence

import (
	_ "embed"

	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

// DefaultRedisPrefix is the key prefix of Redis fences when NewRedis is given
// an empty one.
const DefaultRedisPrefix = "dlock:fence:"

//go:embed redis.lua
var redisLua string

var redisScript = redis.NewScript(redisLua)

// Redis fences values stored in Redis. Each resource is one hash, at the
// prefix followed by the resource key, with two fields:
//
//	fence  the highest token seen, as 20 zero-padded decimal digits
//	value  the value
//
// Get, Set and Delete are each one Lua script call (redis.lua, embedded), so
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
type Redis struct {
	c      redis.UniversalClient
	prefix string
}

// NewRedis returns a checker storing fences and values under prefix
// (DefaultRedisPrefix if empty) on c.
func NewRedis(c redis.UniversalClient, prefix string) (*Redis, error) {
	if c == nil {
		return nil, invalid("NewRedis with a nil client")
	}
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	return &Redis{c: c, prefix: prefix}, nil
}

// Key returns the Redis key of resource's hash.
func (r *Redis) Key(resource string) string { return r.prefix + resource }

// Set stores value for resource if token is accepted.
func (r *Redis) Set(ctx context.Context, resource string, token dlock.Token, value string) error {
	_, err := r.run(ctx, "set", resource, token, value)
	return err
}

// Get returns resource's value if token is accepted, raising the fence. It
// returns ErrNotFound when the token is accepted but no value is stored.
func (r *Redis) Get(ctx context.Context, resource string, token dlock.Token) (string, error) {
	return r.run(ctx, "get", resource, token, "")
}

// Delete removes resource's value if token is accepted. The fence stays.
func (r *Redis) Delete(ctx context.Context, resource string, token dlock.Token) error {
	_, err := r.run(ctx, "del", resource, token, "")
	return err
}

// Highest returns the highest token seen for resource, 0 if none.
func (r *Redis) Highest(ctx context.Context, resource string) (dlock.Token, error) {
	if err := checkResource(resource); err != nil {
		return 0, err
	}
	s, err := r.c.HGet(ctx, r.Key(resource), "fence").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fence: redis: read fence of %q: %w", resource, err)
	}
	return DecodeToken(s)
}

func (r *Redis) run(ctx context.Context, op, resource string, token dlock.Token, value string) (string, error) {
	if err := checkResource(resource); err != nil {
		return "", err
	}
	if token == 0 {
		return "", noToken(resource)
	}
	res, err := redisScript.Run(ctx, r.c, []string{r.Key(resource)}, op, EncodeToken(token), value).Slice()
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
		return "", fmt.Errorf("%w: no value stored for %q", ErrNotFound, resource)
	case 0:
		if len(res) > 1 {
			s, _ := res[1].(string)
			if h, err := DecodeToken(s); err == nil {
				return "", &StaleError{Resource: resource, Token: token, Highest: h}
			}
		}
	}
	return "", fmt.Errorf("fence: redis: fenced %s of %q: unexpected reply %v", op, resource, res)
}
