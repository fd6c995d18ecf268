package redisfence_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testenv"
)

// unique and testCtx name the shared helpers as this package's tests use
// them.
func unique(t testing.TB, base string) string { return testenv.Unique(t, base) }

func testCtx(t testing.TB) context.Context { return testenv.Context(t, 2*time.Minute) }

// openRedis connects to the redis topology (DLOCK_REDIS_URL).
func openRedis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Endpoint(t, "DLOCK_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(testCtx(t)).Err(); err != nil {
		t.Fatalf("redis: %v", err)
	}
	return c
}

// cleanRedis deletes the keys under prefix when the test ends.
func cleanRedis(t testing.TB, c *redis.Client, prefix string) {
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
}
