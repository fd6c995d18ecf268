package fence_test

import (
	"database/sql"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// Benchmarks of one accepted fenced operation per iteration (the token
// rises with b.N, so every operation passes the fence and raises it).

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

func BenchmarkSQLTableTx(b *testing.B) {
	db := openPostgres(b)
	ctx := testCtx(b)
	ft := fence.SQLTable{Name: unique(b, "fence_bench")}
	if err := ft.Create(ctx, db); err != nil {
		b.Fatal(err)
	}
	dropAfter(b, db, ft.Name)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := ft.Tx(ctx, db, nil, "r", dlock.Token(i), func(*sql.Tx) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSQLColumnUpdate(b *testing.B) {
	db := openPostgres(b)
	ctx := testCtx(b)
	name := unique(b, "fence_bench_stock")
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+name+` (sku text PRIMARY KEY, qty bigint NOT NULL, fence_token bigint NOT NULL DEFAULT 0)`); err != nil {
		b.Fatal(err)
	}
	dropAfter(b, db, name)
	if _, err := db.ExecContext(ctx, `INSERT INTO `+name+` (sku, qty) VALUES ('s', 0)`); err != nil {
		b.Fatal(err)
	}
	c := fence.SQLColumn{Table: name, Key: "sku"}
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := c.Update(ctx, db, "s", dlock.Token(i), "qty = qty + 1"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedisSet(b *testing.B) {
	c := openRedis(b)
	prefix := unique(b, "dlock-fence-bench") + ":"
	cleanRedis(b, c, prefix)
	r, _ := fence.NewRedis(c, prefix)
	ctx := testCtx(b)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if err := r.Set(ctx, "k", dlock.Token(i), "v"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEtcdDo(b *testing.B) {
	c := openEtcd(b)
	base := unique(b, "dlock-fence-bench") + "/"
	cleanEtcd(b, c, base)
	e, _ := fence.NewEtcd(c, base+"fence/")
	ctx := testCtx(b)
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		if _, err := e.Do(ctx, "k", dlock.Token(i), clientv3.OpPut(base+"data", "v")); err != nil {
			b.Fatal(err)
		}
	}
}
