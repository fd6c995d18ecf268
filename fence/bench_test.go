package fence_test

import (
	"fmt"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// Benchmarks of one accepted fenced operation per iteration (the token
// rises with b.N, so every operation passes the fence and raises it). The
// database/sql checkers' benchmarks run against PostgreSQL in
// tools/sqlfencetest; the Redis and etcd checkers' beside their backends.

func BenchmarkMemoryDo(b *testing.B) {
	var m fence.Memory
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			_ = m.Do(fmt.Sprint("k", i%64), dlock.Token(i), func() error { return nil })
		}
	})
}
