package sqlfencetest

import (
	"database/sql"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// Benchmarks of one accepted fenced operation per iteration (the token
// rises with b.N, so every operation passes the fence and raises it).

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
