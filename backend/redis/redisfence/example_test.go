package redisfence_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/redisfence"
	"github.com/dlock-go/dlock/fence"
)

// A holder reads and writes a value in Redis, each operation fenced by its
// token.
func ExampleChecker() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	values, err := redisfence.New(rdb, "myapp:fenced:")
	if err != nil {
		log.Fatal(err)
	}
	var token dlock.Token = 42 // m.Token() of the held lock
	cfg, err := values.Get(ctx, "config", token)
	if err != nil && !errors.Is(err, fence.ErrNotFound) {
		log.Fatal(err)
	}
	if err := values.Set(ctx, "config", token, cfg+"+1"); err != nil {
		log.Fatal(err)
	}
}
