package etcdfence_test

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd/etcdfence"
)

// One accepted fenced transaction per iteration.
func BenchmarkDo(b *testing.B) {
	c := openEtcd(b)
	base := unique(b, "dlock-fence-bench") + "/"
	cleanEtcd(b, c, base)
	e, _ := etcdfence.New(c, base+"fence/")
	ctx := testCtx(b)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if _, err := e.Do(ctx, "k", dlock.Token(i), clientv3.OpPut(base+"data", "v")); err != nil {
			b.Fatal(err)
		}
	}
}
