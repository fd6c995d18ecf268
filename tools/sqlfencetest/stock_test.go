package sqlfencetest

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/fence"
)

// TestSQLStockNeverNegative runs the stock decrement under a real lock
// (the memory backend, leases of 100ms without renewal) with holders that
// pause past their lease between their read and their write. Each holder
// reads the stock (fenced), sells only if it is positive, and decrements
// with qty = qty - 1 (fenced). Unfenced, a paused holder that read the last
// item would decrement a stock another holder had already emptied. Fenced,
// the stock never goes negative and every sale is accounted for.
func TestSQLStockNeverNegative(t *testing.T) {
	db := openPostgres(t)
	db.SetMaxOpenConns(20)
	ctx := testCtx(t)
	c := newStockTable(t, db)
	sales := unique(t, "fence_sales")
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+sales+` (id bigserial PRIMARY KEY, worker int NOT NULL, tok bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	dropAfter(t, db, sales)
	const initial = 12
	if _, err := db.ExecContext(ctx, `INSERT INTO `+c.Table+` (sku, qty) VALUES ('widget', $1)`, initial); err != nil {
		t.Fatal(err)
	}
	locker, err := memory.New(memory.NewStore(), dlock.WithTTL(100*time.Millisecond), dlock.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()

	var refusedReads, refusedWrites atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 5; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := locker.NewMutex("stock/widget")
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; ; i++ {
				if err := m.Lock(ctx); err != nil {
					t.Error(err)
					return
				}
				tok := m.Token()
				// Workers 0 and 1 pause past their lease on most
				// turns, after reading: the dangerous place.
				pause := w < 2 && i%3 != 2
				done, err := sellOne(ctx, db, c, sales, w, tok, pause)
				switch {
				case errors.Is(err, errReadRefused):
					refusedReads.Add(1)
				case errors.Is(err, fence.ErrStale):
					refusedWrites.Add(1)
				case err != nil:
					t.Error(err)
				}
				if err := m.Unlock(context.Background()); err != nil && !errors.Is(err, dlock.ErrLockLost) {
					t.Error(err)
				}
				if done || t.Failed() {
					return
				}
			}
		}()
	}
	wg.Wait()

	var qty, sold int
	if err := db.QueryRowContext(ctx, `SELECT qty FROM `+c.Table+` WHERE sku = 'widget'`).Scan(&qty); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM `+sales).Scan(&sold); err != nil {
		t.Fatal(err)
	}
	t.Logf("qty %d, sold %d, refused reads %d, refused writes %d", qty, sold, refusedReads.Load(), refusedWrites.Load())
	if qty < 0 {
		t.Errorf("stock went negative: %d", qty)
	}
	if sold != initial-qty {
		t.Errorf("sold %d items but the stock fell by %d: oversold", sold, initial-qty)
	}
	if qty != 0 {
		t.Errorf("workers stopped with %d in stock", qty)
	}
	if refusedWrites.Load() == 0 {
		t.Error("no paused holder's write was refused: the fence was never exercised")
	}
}

var errReadRefused = errors.New("read refused")

// sellOne is one holder's turn: fenced read; if in stock, (pause,) then a
// fenced decrement recorded with the sale in one transaction. It reports
// done when the stock is empty.
func sellOne(ctx context.Context, db *sql.DB, c fence.SQLColumn, sales string, w int, tok dlock.Token, pause bool) (done bool, err error) {
	var qty int
	if err := c.Read(ctx, db, "widget", tok, "qty", &qty); err != nil {
		if errors.Is(err, fence.ErrStale) {
			return false, errReadRefused
		}
		return false, err
	}
	if qty <= 0 {
		return true, nil
	}
	if pause {
		time.Sleep(300 * time.Millisecond) // 3 leases: others take over
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if err := c.Update(ctx, tx, "widget", tok, "qty = qty - 1"); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+sales+` (worker, tok) VALUES ($1, $2)`, w, int64(tok)); err != nil {
		return false, err
	}
	return false, tx.Commit()
}
