package redissentinel_test

import (
	"context"
	"log"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/redis/redissentinel"
)

// A primary behind Sentinels: list the Sentinels and name the primary.
// The client follows the primary across a failover.
func Example() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381?master_name=mymaster")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	m, err := locker.NewMutex("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
}
