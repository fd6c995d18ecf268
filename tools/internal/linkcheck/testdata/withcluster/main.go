// Command withcluster also opens redis+cluster:// and redis+sentinel://.
package main

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/redis"
	_ "github.com/dlock-go/dlock/backend/redis/rediscluster"
	_ "github.com/dlock-go/dlock/backend/redis/redissentinel"
)

func main() {
	l, err := dlock.Open(context.Background(), "redis+cluster://127.0.0.1:7000")
	fmt.Println(l, err)
}
