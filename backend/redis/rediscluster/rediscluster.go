// Package rediscluster registers the URL schemes redis+cluster and
// rediss+cluster with dlock.Open: the Redis backend (package redis) over a
// Redis Cluster, through go-redis's ClusterClient.
//
//	import _ "github.com/dlock-go/dlock/backend/redis/rediscluster"
//
//	locker, err := dlock.Open(ctx, "redis+cluster://h1:7000,h2:7001,h3:7002")
//
// The hosts are seed nodes (the client learns the others from the slot
// map); the parameters are package redis's (prefix, wait_replicas,
// wait_timeout, allow_eviction) and go-redis's own (read_timeout, ...). A
// Cluster has no database number. Everything else, the lock keys sharing
// one hash slot, sharded pub/sub on Redis 7 and what a failover can and
// cannot break, is in package redis's documentation.
//
// The schemes live in a package of their own so that a program that uses
// only redis:// does not link the Cluster client.
package rediscluster

import (
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/backend/redis/internal/redisclient"
)

// The URL schemes this package registers.
const (
	Scheme    = "redis+cluster"  // redis+cluster://h1:7000,h2:7001[?params]
	SchemeTLS = "rediss+cluster" // the same over TLS
)

func init() {
	open := redis.Opener(redisclient.Cluster)
	dlock.Register(Scheme, open)
	dlock.Register(SchemeTLS, open)
}
