package redisfence_test

import (
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/redisfence"
)

// One accepted fenced Set per iteration (one EVALSHA).
func BenchmarkSet(b *testing.B) {
	c := openRedis(b)
	prefix := unique(b, "dlock-fence-bench") + ":"
	cleanRedis(b, c, prefix)
	r, _ := redisfence.New(c, prefix)
	ctx := testCtx(b)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := r.Set(ctx, "k", dlock.Token(i), "v"); err != nil {
			b.Fatal(err)
		}
	}
}
