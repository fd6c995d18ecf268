package sqlfencetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/dlock-go/dlock/internal/testenv"
)

// unique and testCtx name the shared helpers as this package's tests use
// them.
func unique(t testing.TB, base string) string { return testenv.Unique(t, base) }

func testCtx(t testing.TB) context.Context { return testenv.Context(t, 2*time.Minute) }

// openPostgres connects to the postgres topology (DLOCK_POSTGRES_URL).
func openPostgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", testenv.Endpoint(t, "DLOCK_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(testCtx(t)); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	return db
}

// dropAfter drops table when the test ends.
func dropAfter(t testing.TB, db *sql.DB, table string) {
	t.Cleanup(func() {
		if _, err := db.Exec(`DROP TABLE IF EXISTS "` + strings.ReplaceAll(table, `"`, `""`) + `"`); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}
