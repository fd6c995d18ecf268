package rediscluster_test

import (
	"context"
	"log"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/redis/rediscluster"
)

// A Redis Cluster: list the seed nodes. Locks spread over the masters by
// key.
func Example() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002")
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	m, err := locker.NewMutex("reports/daily")
	if err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		// ctx is cancelled if the lock is lost.
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
