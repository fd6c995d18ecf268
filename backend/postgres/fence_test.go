package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
	"github.com/dlock-go/dlock/internal/testenv"
)

// stock is a table the tests fence: one counter row.
func (e *env) stock(t *testing.T) string {
	t.Helper()
	name := pgx.Identifier{testenv.Unique(t, "dlock_stock")}.Sanitize()
	ctx := testenv.Context(t, time.Minute)
	if _, err := e.admin.Exec(ctx, `CREATE TABLE `+name+` (id int PRIMARY KEY, n int NOT NULL, token bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.admin.Exec(context.Background(), `DROP TABLE IF EXISTS `+name) })
	if _, err := e.admin.Exec(ctx, `INSERT INTO `+name+` VALUES (1, 10, 0)`); err != nil {
		t.Fatal(err)
	}
	return name
}

func (e *env) readStock(t *testing.T, table string) (n int, token int64) {
	t.Helper()
	if err := e.admin.QueryRow(testenv.Context(t, time.Minute), `SELECT n, token FROM `+table+` WHERE id = 1`).Scan(&n, &token); err != nil {
		t.Fatal(err)
	}
	return n, token
}

// decrement is a fenced write: stock - 1, recording the writer's token.
func decrement(table string, token dlock.Token) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `UPDATE `+table+` SET n = n - 1, token = $1 WHERE id = 1`, int64(token))
		return err
	}
}

// A holder paused past its lease, whose key another holder has since
// taken, cannot commit: the lock check and the write are one transaction.
func TestFenceStaleHolderCannotCommit(t *testing.T) {
	e := newEnv(t)
	table := e.stock(t)
	ctx := testenv.Context(t, time.Minute)
	f, err := NewFence(Config{Table: e.table})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	a := mustMutex(t, e.locker(t), "stock", dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	b := mustMutex(t, e.locker(t), "stock", dlock.WithTTL(time.Minute))
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	stale := a.Token()
	if err := f.Tx(ctx, e.admin, "stock", stale, decrement(table, stale)); err != nil {
		t.Fatalf("fenced write by the holder: %v", err)
	}
	// a is "paused": its lease runs out and b takes the key.
	if err := b.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	err = f.Tx(ctx, e.admin, "stock", stale, decrement(table, stale))
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, fence.ErrStale) {
		t.Fatalf("fenced write by the holder whose lease was taken over: %v; want ErrLockLost and fence.ErrStale", err)
	}
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Highest != b.Token() {
		t.Fatalf("stale error %v; want the new holder's token %d", err, b.Token())
	}
	if n, tok := e.readStock(t, table); n != 9 || tok != int64(stale) {
		t.Fatalf("stock %d written by token %d; want 9 by %d (the stale write must not commit)", n, tok, stale)
	}
	if err := f.Tx(ctx, e.admin, "stock", b.Token(), decrement(table, b.Token())); err != nil {
		t.Fatalf("fenced write by the new holder: %v", err)
	}
	if n, _ := e.readStock(t, table); n != 8 {
		t.Fatalf("stock %d; want 8", n)
	}
	// After b releases, its token is no longer current either.
	tok := b.Token()
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Tx(ctx, e.admin, "stock", tok, decrement(table, tok)); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("fenced write after Unlock: %v; want ErrLockLost", err)
	}
	if err := f.Tx(ctx, e.admin, "stock", 0, decrement(table, 0)); !errors.Is(err, fence.ErrNoToken) {
		t.Fatalf("fenced write with token 0: %v; want fence.ErrNoToken", err)
	}
	if err := f.Tx(ctx, e.admin, "nobody", 5, decrement(table, 5)); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("fenced write on a key never locked: %v; want ErrLockLost", err)
	}
	if n, _ := e.readStock(t, table); n != 8 {
		t.Fatalf("stock %d; want 8 (refused writes must not commit)", n)
	}
}

// While a transaction that passed the check is open, nobody can take the
// key, even once the lease has run out: the takeover waits for the commit,
// so the fenced write is ordered before the next holder.
func TestFenceTakeoverWaitsForTransaction(t *testing.T) {
	e := newEnv(t)
	table := e.stock(t)
	ctx := testenv.Context(t, time.Minute)
	f, err := NewFence(Config{Table: e.table})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	a := mustMutex(t, e.locker(t), "stock", dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	b := mustMutex(t, e.locker(t), "stock", dlock.WithTTL(time.Minute))
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := e.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := f.Check(ctx, tx, "stock", a.Token()); err != nil {
		t.Fatalf("Check by the holder: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctx) }()
	time.Sleep(3 * ttl) // a's lease has run out; the transaction is still open
	select {
	case err := <-got:
		t.Fatalf("the key was taken (%v) while a checked transaction was open", err)
	default:
	}
	if err := decrement(table, a.Token())(tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit of the checked transaction: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock by the next holder after the commit: %v", err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("next token %d not greater than %d", b.Token(), a.Token())
	}
	if n, tok := e.readStock(t, table); n != 9 || tok != int64(a.Token()) {
		t.Fatalf("stock %d by token %d; want the checked write (9 by %d)", n, tok, a.Token())
	}
}
