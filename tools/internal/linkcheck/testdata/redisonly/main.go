// Command redisonly is what a Redis-only user links: dlock, redis://,
// fencing and the Redis fence checker.
package main

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/backend/redis/redisfence"
	"github.com/dlock-go/dlock/fence"
)

func main() {
	l, err := dlock.Open(context.Background(), "redis://127.0.0.1:6379")
	fmt.Println(l, err)
	c, err := redisfence.New(goredis.NewClient(&goredis.Options{}), "")
	var m fence.Memory
	fmt.Println(c, err, m.Do("x", 1, func() error { return nil }))
}
