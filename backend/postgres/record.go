package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/driver"
)

// recordSuffix names the record table after the lease table. With
// MaxTableLen, "<table>_records" stays within PostgreSQL's 63 bytes.
const recordSuffix = "_records"

var _ driver.Recorder = (*pgDriver)(nil)

// recordSQL returns the statements on the record table.
func (n names) recordSQL() (create, record, read, clear string) {
	create = `CREATE TABLE IF NOT EXISTS ` + n.recordsQ + ` (
    key_hash bytea PRIMARY KEY,
    key      bytea NOT NULL,
    value    bytea NOT NULL
)`
	// One statement: the insert, or the row that made it do nothing. A
	// row committed by another transaction after this statement's
	// snapshot makes the insert do nothing and is not seen by the select;
	// read then runs with a fresh snapshot.
	record = `WITH ins AS (
    INSERT INTO ` + n.recordsQ + ` (key_hash, key, value) VALUES ($1, $2, $3)
    ON CONFLICT (key_hash) DO NOTHING
    RETURNING key, value
)
SELECT key, value FROM ins
UNION ALL
SELECT key, value FROM ` + n.recordsQ + ` WHERE key_hash = $1 AND NOT EXISTS (SELECT 1 FROM ins)`
	read = `SELECT key, value FROM ` + n.recordsQ + ` WHERE key_hash = $1`
	clear = `DELETE FROM ` + n.recordsQ + ` WHERE key_hash = $1 AND key = $2 AND value = $3`
	return
}

// Record inserts key's row in the record table unless it has one, and
// returns the row's value. The table is created on first use, as the
// lease table is.
func (d *pgDriver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	_, record, read, _ := d.n.recordSQL()
	hash := keyHash(key)
	for created := false; ; {
		var k, v []byte
		err := d.pool.QueryRow(ctx, record, hash, []byte(key), []byte(value)).Scan(&k, &v)
		if errors.Is(err, pgx.ErrNoRows) {
			err = d.pool.QueryRow(ctx, read, hash).Scan(&k, &v)
			if errors.Is(err, pgx.ErrNoRows) {
				// Cleared meanwhile: insert again.
				if err := d.check(ctx); err != nil {
					return "", err
				}
				continue
			}
		}
		if noTable(err) && !created {
			if err := d.createRecordTable(ctx); err != nil {
				return "", err
			}
			created = true
			continue
		}
		if err != nil {
			return "", d.recordErr(ctx, err)
		}
		if !bytes.Equal(k, []byte(key)) {
			return "", driver.Unavailable(fmt.Errorf("postgres: record of key %q found under the hash of %q (hash collision)", k, key))
		}
		return string(v), nil
	}
}

// ClearRecord deletes key's row if its value is value.
func (d *pgDriver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	_, _, _, clear := d.n.recordSQL()
	tag, err := d.pool.Exec(ctx, clear, keyHash(key), []byte(key), []byte(value))
	if noTable(err) {
		return false, nil // no record was ever made on this table
	}
	if err != nil {
		return false, d.recordErr(ctx, err)
	}
	return tag.RowsAffected() == 1, nil
}

func (d *pgDriver) recordErr(ctx context.Context, err error) error {
	if d.check(context.Background()) != nil {
		return fmt.Errorf("postgres: record: %w", driver.ErrClosed)
	}
	return mapErr(ctx, err)
}

// noTable reports whether err is PostgreSQL's undefined_table.
func noTable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42P01"
}

// createRecordTable creates the record table, serialised with other
// Lockers doing the same by a transaction-scoped advisory lock, as
// createTable does.
func (d *pgDriver) createRecordTable(ctx context.Context) error {
	create, _, _, _ := d.n.recordSQL()
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "dlock create "+d.n.recordsQ); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, create)
		return err
	})
	if err != nil {
		if e := mapErr(ctx, err); errors.Is(e, driver.ErrUnavailable) || ctx.Err() != nil {
			return d.recordErr(ctx, err)
		}
		return fmt.Errorf("postgres: creating record table %s: %w", d.n.recordsQ, err)
	}
	return nil
}
