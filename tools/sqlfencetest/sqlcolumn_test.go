package sqlfencetest

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// newStockTable makes a table of stock rows without a fence column, and
// adds it with AddColumn.
func newStockTable(t *testing.T, db *sql.DB) fence.SQLColumn {
	t.Helper()
	ctx := testCtx(t)
	name := unique(t, "fence_stock")
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+name+` (sku text PRIMARY KEY, qty integer NOT NULL, note text)`); err != nil {
		t.Fatal(err)
	}
	dropAfter(t, db, name)
	c := fence.SQLColumn{Table: name, Key: "sku"}
	for i := 0; i < 2; i++ { // idempotent
		if err := c.AddColumn(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func TestSQLColumnStaleWriteAndRead(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	c := newStockTable(t, db)
	if _, err := db.ExecContext(ctx, `INSERT INTO `+c.Table+` (sku, qty) VALUES ('apple', 10)`); err != nil {
		t.Fatal(err)
	}
	const t1, t2 = dlock.Token(20), dlock.Token(21)

	if err := c.Update(ctx, db, "apple", t2, "qty = $3", 9); err != nil {
		t.Fatalf("t2's write: %v", err)
	}
	err := c.Update(ctx, db, "apple", t1, "qty = $3", 5)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Token != t1 || se.Highest != t2 || se.Resource != "apple" {
		t.Fatalf("t1's write after t2's: got %v, want StaleError{20, 21}", err)
	}
	var qty int
	if err := c.Read(ctx, db, "apple", t1, "qty", &qty); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("t1's read after t2's write: got %v, want ErrStale", err)
	}
	if err := c.Read(ctx, db, "apple", t2, "qty", &qty); err != nil || qty != 9 {
		t.Fatalf("t2's read: %d, %v; want 9", qty, err)
	}
	if h, err := c.Highest(ctx, db, "apple"); err != nil || h != t2 {
		t.Fatalf("Highest = %d, %v; want %d", h, err, t2)
	}
	// A newer holder's read alone shuts the older one out.
	if err := c.Read(ctx, db, "apple", t2+1, "qty", &qty); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, db, "apple", t2, "qty = $3", 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("t2's write after t2+1's read: got %v, want ErrStale", err)
	}
	var q2 int
	var note sql.NullString
	if err := c.Read(ctx, db, "apple", t2+1, "qty, note", &q2, &note); err != nil || q2 != 9 || note.Valid {
		t.Fatalf("read of two columns: %d %v %v", q2, note, err)
	}
}

func TestSQLColumnNotFoundAndBadInput(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	c := newStockTable(t, db)
	var qty int
	if err := c.Read(ctx, db, "none", 1, "qty", &qty); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("read of a missing row: got %v, want ErrNotFound", err)
	}
	if err := c.Update(ctx, db, "none", 1, "qty = 0"); !errors.Is(err, fence.ErrNotFound) {
		t.Errorf("update of a missing row: got %v, want ErrNotFound", err)
	}
	if err := c.Update(ctx, db, "none", 0, "qty = 0"); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("token 0: got %v, want ErrNoToken", err)
	}
	if err := c.Read(ctx, db, "none", 0, "qty", &qty); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("read, token 0: got %v, want ErrNoToken", err)
	}
	if err := c.Upsert(ctx, db, "none", fence.MaxSQLToken+1, []string{"qty"}, 1); !errors.Is(err, fence.ErrTokenRange) {
		t.Errorf("token 2^63: got %v, want ErrTokenRange", err)
	}
	if err := c.Upsert(ctx, db, "none", 1, []string{"qty", "note"}, 1); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("2 columns, 1 value: got %v, want ErrInvalid", err)
	}
	if err := c.Update(ctx, db, "none", 1, " "); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("empty SET: got %v, want ErrInvalid", err)
	}
	if err := (fence.SQLColumn{Table: c.Table}).Update(ctx, db, "none", 1, "qty = 0"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("no Key column: got %v, want ErrInvalid", err)
	}
	// A malformed SQL fragment is the database's error, not a fence verdict.
	err := c.Update(ctx, db, "none", 1, "qty = = 1")
	if err == nil || errors.Is(err, fence.ErrStale) || errors.Is(err, fence.ErrNotFound) {
		t.Errorf("bad SQL: got %v", err)
	}
}

func TestSQLColumnUpsert(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	c := newStockTable(t, db)
	cols := []string{"qty", "note"}
	if err := c.Upsert(ctx, db, "pear", 5, cols, 3, "first"); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if err := c.Upsert(ctx, db, "pear", 4, cols, 99, "stale"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older upsert: got %v, want ErrStale", err)
	}
	if err := c.Upsert(ctx, db, "pear", 5, cols, 2, "same"); err != nil {
		t.Fatalf("equal token: %v", err)
	}
	var qty int
	var note string
	if err := c.Read(ctx, db, "pear", 6, "qty, note", &qty, &note); err != nil || qty != 2 || note != "same" {
		t.Fatalf("after upserts: %d %q %v", qty, note, err)
	}
	if err := c.Upsert(ctx, db, "pear", 5, cols, 1, "after read"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("upsert after a newer read: got %v, want ErrStale", err)
	}
}

// TestSQLColumnQuoting: identifiers with quotes, spaces, upper case and a
// schema are quoted, never read as SQL.
func TestSQLColumnQuoting(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	name := unique(t, `Odd "Tab`)
	qname := `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
	if _, err := db.ExecContext(ctx, `CREATE TABLE public.`+qname+` ("Key col" text PRIMARY KEY, v int NOT NULL, "my fence" bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	dropAfter(t, db, name)
	c := fence.SQLColumn{Table: "public." + name, Key: "Key col", Token: "my fence"}
	if err := c.Upsert(ctx, db, "k", 3, []string{"v"}, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, db, "k", 2, "v = $3", 9); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("got %v, want ErrStale", err)
	}
}
