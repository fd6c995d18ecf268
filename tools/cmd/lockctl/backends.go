package main

// Every backend, so that every URL scheme works. file:// and mem:// come
// with package lockctl.
import (
	_ "github.com/dlock-go/dlock/backend/consul"              // consul://
	_ "github.com/dlock-go/dlock/backend/etcd"                // etcd://
	_ "github.com/dlock-go/dlock/backend/file"                // file://
	_ "github.com/dlock-go/dlock/backend/memory"              // mem://
	_ "github.com/dlock-go/dlock/backend/postgres"            // postgres://, postgresql://
	_ "github.com/dlock-go/dlock/backend/redis"               // redis://, rediss://
	_ "github.com/dlock-go/dlock/backend/redis/rediscluster"  // redis+cluster://, rediss+cluster://
	_ "github.com/dlock-go/dlock/backend/redis/redissentinel" // redis+sentinel://, rediss+sentinel://
	_ "github.com/dlock-go/dlock/backend/redlock"             // redlock://
	_ "github.com/dlock-go/dlock/backend/zookeeper"           // zk://
)
