package sqlfencetest

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// newSQLTable makes a fence table and a data table (k text PRIMARY KEY,
// v integer) with unique names, dropped after the test.
func newSQLTable(t *testing.T, db *sql.DB) (fence.SQLTable, string) {
	t.Helper()
	ctx := testCtx(t)
	// A quote and a space in the name check the quoting.
	ft := fence.SQLTable{Name: unique(t, `fence "t`)}
	if err := ft.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	dropAfter(t, db, ft.Name)
	if err := ft.Create(ctx, db); err != nil {
		t.Fatalf("Create is not idempotent: %v", err)
	}
	data := unique(t, "fence_data")
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+data+` (k text PRIMARY KEY, v integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	dropAfter(t, db, data)
	return ft, data
}

func readV(t *testing.T, q fence.Querier, data, k string) int {
	t.Helper()
	var v int
	err := q.QueryRowContext(testCtx(t), `SELECT v FROM `+data+` WHERE k = $1`, k).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSQLTableStaleWriteAndRead: holders with t1 < t2; t2 writes first;
// t1's write and t1's read are both refused, and t1's write never lands.
func TestSQLTableStaleWriteAndRead(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	ft, data := newSQLTable(t, db)
	const t1, t2 = dlock.Token(10), dlock.Token(11)
	write := func(tok dlock.Token, v int) error {
		return ft.Tx(ctx, db, nil, "res", tok, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO `+data+` (k, v) VALUES ('res', $1)
ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, v)
			return err
		})
	}
	if err := write(t2, 2); err != nil {
		t.Fatalf("t2's write: %v", err)
	}

	err := write(t1, 1)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Token != t1 || se.Highest != t2 {
		t.Fatalf("t1's write after t2's: got %v, want StaleError{10, 11}", err)
	}
	if !strings.Contains(err.Error(), "10") || !strings.Contains(err.Error(), "11") {
		t.Errorf("message %q lacks the two tokens", err)
	}
	ran := false
	err = ft.Tx(ctx, db, nil, "res", t1, func(tx *sql.Tx) error {
		ran = true
		readV(t, tx, data, "res")
		return nil
	})
	if !errors.Is(err, fence.ErrStale) || ran {
		t.Fatalf("t1's read after t2's write: got %v (fn ran: %v), want ErrStale without running", err, ran)
	}
	if v := readV(t, db, data, "res"); v != 2 {
		t.Fatalf("v = %d, want t2's 2", v)
	}
	// The same holder again (equal token) and a newer one are accepted.
	if err := write(t2, 3); err != nil {
		t.Fatalf("t2 again: %v", err)
	}
	if err := write(t2+1, 4); err != nil {
		t.Fatalf("t2+1: %v", err)
	}
	if h, err := ft.Highest(ctx, db, "res"); err != nil || h != t2+1 {
		t.Fatalf("Highest = %d, %v; want %d", h, err, t2+1)
	}
	// Another resource has its own fence.
	if err := ft.Tx(ctx, db, nil, "other", 1, func(*sql.Tx) error { return nil }); err != nil {
		t.Fatalf("token 1 on another resource: %v", err)
	}
}

// TestSQLTableReadFenceBlocksOlderWrite: a newer holder's read alone
// raises the fence, so an older holder cannot write between that read and
// the newer holder's write.
func TestSQLTableReadFenceBlocksOlderWrite(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	ft, data := newSQLTable(t, db)
	if _, err := db.ExecContext(ctx, `INSERT INTO `+data+` VALUES ('r', 10)`); err != nil {
		t.Fatal(err)
	}
	var read int
	if err := ft.Tx(ctx, db, nil, "r", 6, func(tx *sql.Tx) error {
		read = readV(t, tx, data, "r")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := ft.Tx(ctx, db, nil, "r", 5, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE `+data+` SET v = 7 WHERE k = 'r'`)
		return err
	})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("older write after newer read: got %v, want ErrStale", err)
	}
	if v := readV(t, db, data, "r"); v != read {
		t.Fatalf("v = %d, the older holder's write landed", v)
	}
}

func TestSQLTableBadInput(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	ft, _ := newSQLTable(t, db)
	ran := false
	fn := func(*sql.Tx) error { ran = true; return nil }

	if err := ft.Tx(ctx, db, nil, "r", 0, fn); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("token 0: got %v, want ErrNoToken", err)
	}
	if err := ft.Guard(ctx, db, "r", 0); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("Guard, token 0: got %v, want ErrNoToken", err)
	}
	err := ft.Tx(ctx, db, nil, "r", fence.MaxSQLToken+1, fn)
	if !errors.Is(err, fence.ErrTokenRange) || !strings.Contains(err.Error(), "9223372036854775808") {
		t.Errorf("token 2^63: got %v, want ErrTokenRange naming it", err)
	}
	if err := ft.Tx(ctx, db, nil, "", 1, fn); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("empty resource: got %v, want ErrInvalid", err)
	}
	if ran {
		t.Error("fn ran on bad input")
	}
	if h, _ := ft.Highest(ctx, db, "r"); h != 0 {
		t.Errorf("bad input raised the fence to %d", h)
	}
	// The largest storable token is stored exactly.
	if err := ft.Guard(ctx, db, "r", fence.MaxSQLToken); err != nil {
		t.Fatalf("MaxSQLToken: %v", err)
	}
	if h, err := ft.Highest(ctx, db, "r"); err != nil || h != fence.MaxSQLToken {
		t.Errorf("Highest = %d, %v; want MaxSQLToken", h, err)
	}
	if err := (fence.SQLTable{Name: `a..b`}).Guard(ctx, db, "r", 1); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("bad table name: got %v, want ErrInvalid", err)
	}
}

// TestSQLTableRollback: when fn fails, nothing of the transaction stays,
// the raise included, and fn's error is returned.
func TestSQLTableRollback(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	ft, data := newSQLTable(t, db)
	boom := errors.New("boom")
	err := ft.Tx(ctx, db, nil, "r", 3, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+data+` VALUES ('r', 1)`); err != nil {
			return err
		}
		return boom
	})
	if err != boom {
		t.Fatalf("got %v, want fn's error", err)
	}
	if v := readV(t, db, data, "r"); v != -1 {
		t.Errorf("fn's insert survived the rollback")
	}
	if h, _ := ft.Highest(ctx, db, "r"); h != 0 {
		t.Errorf("fence = %d after rollback, want 0", h)
	}
}

// TestSQLTableConcurrent: goroutines with random tokens read-modify-write
// one counter through Tx. The fence row lock serialises accepted
// transactions, so no increment is lost, and they commit in token order.
func TestSQLTableConcurrent(t *testing.T) {
	db := openPostgres(t)
	db.SetMaxOpenConns(20)
	ctx := testCtx(t)
	ft, data := newSQLTable(t, db)
	logT := unique(t, "fence_log")
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+logT+` (id bigserial PRIMARY KEY, tok bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	dropAfter(t, db, logT)
	if _, err := db.ExecContext(ctx, `INSERT INTO `+data+` VALUES ('c', 0)`); err != nil {
		t.Fatal(err)
	}
	const goroutines, perG = 12, 15
	var (
		mu       sync.Mutex
		accepted int
		refused  int
	)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 2))
			for i := 0; i < perG; i++ {
				// Tokens rise with i but overlap between goroutines, as
				// successive holders' tokens would with stragglers.
				tok := dlock.Token(1 + i*4 + r.IntN(12))
				err := ft.Tx(ctx, db, nil, "c", tok, func(tx *sql.Tx) error {
					var v int
					if err := tx.QueryRowContext(ctx, `SELECT v FROM `+data+` WHERE k = 'c'`).Scan(&v); err != nil {
						return err
					}
					time.Sleep(time.Millisecond) // widen the read-write window
					if _, err := tx.ExecContext(ctx, `UPDATE `+data+` SET v = $1 WHERE k = 'c'`, v+1); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, `INSERT INTO `+logT+` (tok) VALUES ($1)`, int64(tok))
					return err
				})
				mu.Lock()
				switch {
				case err == nil:
					accepted++
				case errors.Is(err, fence.ErrStale):
					refused++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if v := readV(t, db, data, "c"); v != accepted {
		t.Errorf("counter = %d, but %d increments were accepted: updates were lost", v, accepted)
	}
	rows, err := db.QueryContext(ctx, `SELECT tok FROM `+logT+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var last int64
	for rows.Next() {
		var tok int64
		if err := rows.Scan(&tok); err != nil {
			t.Fatal(err)
		}
		if tok < last {
			t.Errorf("token %d committed after %d", tok, last)
		}
		last = tok
	}
	if accepted == 0 || refused == 0 {
		t.Errorf("accepted %d, refused %d: want both", accepted, refused)
	}
	t.Logf("accepted %d, refused %d", accepted, refused)
}

// TestSQLTableGuardWaitsForHolder: a Guard on a resource whose fence row is
// held by an open transaction waits for it; a lower token is then refused.
func TestSQLTableGuardWaitsForHolder(t *testing.T) {
	db := openPostgres(t)
	ctx := testCtx(t)
	ft, _ := newSQLTable(t, db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ft.Guard(ctx, tx, "r", 6); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ft.Guard(ctx, db, "r", 5) }()
	select {
	case err := <-done:
		t.Fatalf("Guard passed a fence row held by an open transaction: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 5 after 6 committed: got %v, want ErrStale", err)
	}
	// A cancelled context ends a wait at once.
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := ft.Guard(ctx, tx, "r", 7); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := ft.Guard(cctx, db, "r", 8); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Guard with an expired context: got %v, want DeadlineExceeded", err)
	}
}
