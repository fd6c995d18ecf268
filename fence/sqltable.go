package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
)

// DefaultSQLTable is the fence table's name when SQLTable.Name is empty.
const DefaultSQLTable = "dlock_fence"

// SQLTable fences any statements on a PostgreSQL database through a table of
// fences, one row per resource key:
//
//	CREATE TABLE IF NOT EXISTS dlock_fence (
//	    resource text   PRIMARY KEY,
//	    token    bigint NOT NULL CHECK (token > 0)
//	);
//
// Guard raises the resource's fence inside the caller's transaction in one
// statement, which also locks the fence row until the transaction ends. Every
// statement that follows in that transaction, reads included, is therefore
// fenced: no operation with another token on the same resource can run
// between them, and none with a lower token ever again. Tx wraps the whole
// pattern.
//
// The zero SQLTable uses DefaultSQLTable.
type SQLTable struct {
	// Name is the table, optionally schema-qualified ("app.dlock_fence").
	Name string
}

func (t SQLTable) ident() (string, error) {
	if t.Name == "" {
		return quoteIdent(DefaultSQLTable)
	}
	return quoteIdent(t.Name)
}

// Schema returns the CREATE TABLE statement of the fence table.
func (t SQLTable) Schema() (string, error) {
	id, err := t.ident()
	if err != nil {
		return "", err
	}
	return "CREATE TABLE IF NOT EXISTS " + id + ` (
    resource text   PRIMARY KEY,
    token    bigint NOT NULL CHECK (token > 0)
)`, nil
}

// Create creates the fence table if it does not exist.
func (t SQLTable) Create(ctx context.Context, q Querier) error {
	s, err := t.Schema()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, s); err != nil {
		return fmt.Errorf("fence: create fence table: %w", err)
	}
	return nil
}

// Guard applies the rule to resource in one statement:
//
//	INSERT INTO dlock_fence AS f (resource, token) VALUES ($1, $2)
//	ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token
//	WHERE f.token <= EXCLUDED.token
//	RETURNING f.token
//
// It returns nil when the fence was raised to token (or already equal), a
// *StaleError when a higher token is stored, ErrNoToken for token 0 and
// ErrTokenRange above MaxSQLToken. Call it first in the transaction whose
// statements it protects; on q = *sql.DB it only raises the fence.
func (t SQLTable) Guard(ctx context.Context, q Querier, resource string, token dlock.Token) error {
	if err := CheckResource(resource); err != nil {
		return err
	}
	tok, err := sqlToken(resource, token)
	if err != nil {
		return err
	}
	id, err := t.ident()
	if err != nil {
		return err
	}
	var got int64
	err = q.QueryRowContext(ctx, `INSERT INTO `+id+` AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token
WHERE f.token <= EXCLUDED.token
RETURNING f.token`, resource, tok).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fence: raise fence of %q: %w", resource, err)
	}
	// Refused: a higher token is stored. Read it for the message only; the
	// decision was the statement above.
	highest, err := t.Highest(ctx, q, resource)
	if err != nil {
		return fmt.Errorf("%w: token %d for resource %q refused (reading the highest: %v)", ErrStale, token, resource, err)
	}
	return &StaleError{Resource: resource, Token: token, Highest: highest}
}

// Tx runs fn in a transaction on db whose first statement is Guard, and
// commits if fn returns nil. A fenced read is a Tx whose fn reads; a fenced
// write is one whose fn writes; a read-modify-write may be one Tx. If the
// token is refused, fn does not run and Tx returns the fence's error; if fn
// fails, the transaction is rolled back and fn's error returned.
//
// opts may be nil (READ COMMITTED, PostgreSQL's default). Under REPEATABLE
// READ or SERIALIZABLE a concurrent holder's Guard can make the transaction
// fail with a serialization error, to be retried as usual.
func (t SQLTable) Tx(ctx context.Context, db *sql.DB, opts *sql.TxOptions, resource string, token dlock.Token, fn func(tx *sql.Tx) error) error {
	if err := CheckResource(resource); err != nil {
		return err
	}
	if _, err := sqlToken(resource, token); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("fence: begin: %w", err)
	}
	if err := t.Guard(ctx, tx, resource, token); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("fence: commit: %w", err)
	}
	return nil
}

// Highest returns the highest token stored for resource, 0 if none.
func (t SQLTable) Highest(ctx context.Context, q Querier, resource string) (dlock.Token, error) {
	id, err := t.ident()
	if err != nil {
		return 0, err
	}
	var v int64
	err = q.QueryRowContext(ctx, `SELECT token FROM `+id+` WHERE resource = $1`, resource).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fence: read fence of %q: %w", resource, err)
	}
	return dlock.Token(v), nil
}
