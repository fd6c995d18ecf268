// Package redissentinel registers the URL schemes redis+sentinel and
// rediss+sentinel with dlock.Open: the Redis backend (package redis) on the
// primary that a set of Sentinels watch, through go-redis's failover
// client, which follows the primary across failovers.
//
//	import _ "github.com/dlock-go/dlock/backend/redis/redissentinel"
//
//	locker, err := dlock.Open(ctx, "redis+sentinel://s1:26379,s2:26379,s3:26379/0?master_name=mymaster")
//
// The hosts are Sentinels (port 26379 when none is given); master_name=
// is required. The other parameters are package redis's (prefix,
// wait_replicas, wait_timeout, allow_eviction) and go-redis's own. What a
// failover can and cannot break is in package redis's documentation.
//
// The schemes live in a package of their own so that a program that uses
// only redis:// does not link the failover client.
package redissentinel

import (
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/backend/redis/internal/redisclient"
)

// The URL schemes this package registers.
const (
	Scheme    = "redis+sentinel"  // redis+sentinel://s1:26379,s2:26379[/db]?master_name=NAME[&params]
	SchemeTLS = "rediss+sentinel" // the same over TLS
)

func init() {
	open := redis.Opener(redisclient.Sentinel)
	dlock.Register(Scheme, open)
	dlock.Register(SchemeTLS, open)
}
