package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// The schema. The stock row carries its own fence (fence.SQLColumn), so
// each fenced statement checks the token and acts in one step. There is
// deliberately no CHECK (qty >= 0): the point is that the fence alone keeps
// the stock from going negative.
const schema = `
CREATE TABLE IF NOT EXISTS stock (
    sku         text    PRIMARY KEY,
    qty         integer NOT NULL,
    fence_token bigint  NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS stock_sale (
    id     bigserial   PRIMARY KEY,
    sku    text        NOT NULL,
    worker integer     NOT NULL,
    token  bigint      NOT NULL,
    at     timestamptz NOT NULL DEFAULT now()
)`

// stockFence fences the rows of the stock table by SKU.
var stockFence = fence.SQLColumn{Table: "stock", Key: "sku", Token: "fence_token"}

func openDB(ctx context.Context, url string) (*sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return db, nil
}

// setup creates the tables and sets sku's stock to qty, with its fence and
// its sales reset.
func setup(ctx context.Context, db *sql.DB, sku string, qty int) error {
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM stock_sale WHERE sku = $1`, sku); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO stock (sku, qty) VALUES ($1, $2)
ON CONFLICT (sku) DO UPDATE SET qty = EXCLUDED.qty, fence_token = 0`, sku, qty); err != nil {
		return err
	}
	return tx.Commit()
}

// readStock is a fenced read: it raises the row's fence to token, so no
// holder with a lower token can write the row after it, and returns qty.
func readStock(ctx context.Context, db *sql.DB, sku string, token dlock.Token, unfenced bool) (int, error) {
	var qty int
	if unfenced {
		err := db.QueryRowContext(ctx, `SELECT qty FROM stock WHERE sku = $1`, sku).Scan(&qty)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("no stock row for %q (run stock setup)", sku)
		}
		return qty, err
	}
	err := stockFence.Read(ctx, db, sku, token, "qty", &qty)
	if errors.Is(err, fence.ErrNotFound) {
		return 0, fmt.Errorf("no stock row for %q (run stock setup): %w", sku, err)
	}
	return qty, err
}

// sellOne decrements the stock and records the sale, in one transaction
// whose decrement is fenced: it fails with fence.ErrStale, changing
// nothing, when a holder with a higher token has read or written the row.
func sellOne(ctx context.Context, db *sql.DB, sku string, worker int, token dlock.Token, unfenced bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if unfenced {
		_, err = tx.ExecContext(ctx, `UPDATE stock SET qty = qty - 1 WHERE sku = $1`, sku)
	} else {
		err = stockFence.Update(ctx, tx, sku, token, "qty = qty - 1")
	}
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO stock_sale (sku, worker, token) VALUES ($1, $2, $3)`,
		sku, worker, int64(token)); err != nil {
		return err
	}
	return tx.Commit()
}

// tally is the state of one SKU.
type tally struct {
	Qty   int // stock left
	Sold  int // sales recorded
	Fence dlock.Token
}

func readTally(ctx context.Context, db *sql.DB, sku string) (tally, error) {
	var t tally
	var f int64
	err := db.QueryRowContext(ctx, `SELECT qty, fence_token, (SELECT count(*) FROM stock_sale WHERE sku = $1)
FROM stock WHERE sku = $1`, sku).Scan(&t.Qty, &f, &t.Sold)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("no stock row for %q (run stock setup)", sku)
	}
	t.Fence = dlock.Token(f)
	return t, err
}

func printSales(ctx context.Context, w io.Writer, db *sql.DB, sku string) error {
	rows, err := db.QueryContext(ctx, `SELECT worker, token FROM stock_sale WHERE sku = $1 ORDER BY id`, sku)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var worker int
		var token int64
		if err := rows.Scan(&worker, &token); err != nil {
			return err
		}
		fmt.Fprintf(w, "  sale by worker %d with token %d\n", worker, token)
	}
	return rows.Err()
}
