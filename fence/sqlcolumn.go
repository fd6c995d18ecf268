package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock"
)

// DefaultSQLColumn is the fence column's name when SQLColumn.Token is empty.
const DefaultSQLColumn = "fence_token"

// SQLColumn fences the rows of one PostgreSQL table through a fence column
// on each row, so that one statement both checks the fence and acts:
//
//	CREATE TABLE stock (
//	    sku         text    PRIMARY KEY,
//	    qty         integer NOT NULL,
//	    fence_token bigint  NOT NULL DEFAULT 0
//	);
//
// The resource key is the row's key. Each method is a single statement
// carrying the condition fence_token <= $token, so there is no window
// between the check and the effect:
//
//	UPDATE stock SET qty = $3, fence_token = $1 WHERE sku = $2 AND fence_token <= $1
//
// Read raises the fence the same way and returns the row (UPDATE ...
// RETURNING), which is what makes it a fenced read: after it, no holder with
// a lower token can write the row. Inside a transaction the row stays locked
// until it ends, so a Read followed by an Update in one transaction is a
// fenced read-modify-write.
//
// Identifiers are quoted; the SQL fragments given to Update and Read (set,
// cols) are the caller's own SQL and are used as written.
type SQLColumn struct {
	// Table is the resource table, optionally schema-qualified.
	Table string
	// Key is a column that identifies one row (primary key or unique).
	Key string
	// Token is the fence column, bigint NOT NULL DEFAULT 0. Empty means
	// DefaultSQLColumn.
	Token string
}

type columnIdents struct{ table, key, token string }

func (c SQLColumn) idents() (columnIdents, error) {
	var id columnIdents
	var err error
	if id.table, err = quoteIdent(c.Table); err != nil {
		return id, fmt.Errorf("SQLColumn.Table: %w", err)
	}
	if id.key, err = quoteIdent(c.Key); err != nil {
		return id, fmt.Errorf("SQLColumn.Key: %w", err)
	}
	tok := c.Token
	if tok == "" {
		tok = DefaultSQLColumn
	}
	if id.token, err = quoteIdent(tok); err != nil {
		return id, fmt.Errorf("SQLColumn.Token: %w", err)
	}
	return id, nil
}

// AddColumn adds the fence column to the table if it is missing
// (ALTER TABLE ... ADD COLUMN IF NOT EXISTS fence_token bigint NOT NULL
// DEFAULT 0).
func (c SQLColumn) AddColumn(ctx context.Context, q Querier) error {
	id, err := c.idents()
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `ALTER TABLE `+id.table+` ADD COLUMN IF NOT EXISTS `+id.token+` bigint NOT NULL DEFAULT 0`)
	if err != nil {
		return fmt.Errorf("fence: add fence column: %w", err)
	}
	return nil
}

// rowOp is one fenced statement on key's row, its arguments checked.
type rowOp struct {
	c     SQLColumn
	id    columnIdents
	key   any
	res   string // key as text, for messages
	token dlock.Token
	tok   int64 // token as the bigint parameter $1
}

func (c SQLColumn) op(key any, token dlock.Token) (rowOp, error) {
	o := rowOp{c: c, key: key, res: fmt.Sprint(key), token: token}
	var err error
	if o.tok, err = sqlToken(o.res, token); err != nil {
		return o, err
	}
	o.id, err = c.idents()
	return o, err
}

// exec runs stmt with $1 = token, $2 = key and args after them, and turns
// "no row affected" into the reason.
func (o rowOp) exec(ctx context.Context, q Querier, what, stmt string, args ...any) error {
	r, err := q.ExecContext(ctx, stmt, append([]any{o.tok, o.key}, args...)...)
	if err == nil {
		var n int64
		if n, err = r.RowsAffected(); err == nil && n > 0 {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("fence: fenced %s of %q: %w", what, o.res, err)
	}
	return o.refused(ctx, q)
}

// Update runs, as one statement,
//
//	UPDATE table SET <set>, fence_token = $1 WHERE key = $2 AND fence_token <= $1
//
// with $1 = token, $2 = key and args as $3, $4, ... (so set is written with
// placeholders from $3 on, e.g. "qty = $3"). It returns a *StaleError when
// the row's fence is higher than token, and ErrNotFound when there is no
// row for key.
func (c SQLColumn) Update(ctx context.Context, q Querier, key any, token dlock.Token, set string, args ...any) error {
	o, err := c.op(key, token)
	if err != nil {
		return err
	}
	if strings.TrimSpace(set) == "" {
		return invalid("empty SET clause")
	}
	id := o.id
	return o.exec(ctx, q, "update",
		`UPDATE `+id.table+` SET `+set+`, `+id.token+` = $1 WHERE `+id.key+` = $2 AND `+id.token+` <= $1`, args...)
}

// Read raises the row's fence to token and returns its columns, as one
// statement:
//
//	UPDATE table SET fence_token = $1 WHERE key = $2 AND fence_token <= $1 RETURNING <cols>
//
// scanning the result into dest. It returns a *StaleError when the row's
// fence is higher than token, and ErrNotFound when there is no row for key.
func (c SQLColumn) Read(ctx context.Context, q Querier, key any, token dlock.Token, cols string, dest ...any) error {
	o, err := c.op(key, token)
	if err != nil {
		return err
	}
	if strings.TrimSpace(cols) == "" {
		return invalid("empty column list")
	}
	id := o.id
	err = q.QueryRowContext(ctx, `UPDATE `+id.table+` SET `+id.token+` = $1 WHERE `+id.key+` = $2 AND `+id.token+` <= $1 RETURNING `+cols,
		o.tok, key).Scan(dest...)
	if err == nil {
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("fence: fenced read of %q: %w", o.res, err)
	}
	return o.refused(ctx, q)
}

// Upsert inserts the row for key with the given columns, or replaces them if
// the row exists and its fence is <= token, as one statement:
//
//	INSERT INTO table AS r (key, fence_token, c1, c2) VALUES ($2, $1, $3, $4)
//	ON CONFLICT (key) DO UPDATE SET fence_token = EXCLUDED.fence_token,
//	    c1 = EXCLUDED.c1, c2 = EXCLUDED.c2
//	WHERE r.fence_token <= EXCLUDED.fence_token
//
// cols and vals pair up; cols are column names (quoted here). It returns a
// *StaleError when the existing row's fence is higher than token.
func (c SQLColumn) Upsert(ctx context.Context, q Querier, key any, token dlock.Token, cols []string, vals ...any) error {
	o, err := c.op(key, token)
	if err != nil {
		return err
	}
	if len(cols) != len(vals) {
		return invalid("Upsert: %d columns but %d values", len(cols), len(vals))
	}
	id := o.id
	names := []string{id.key, id.token}
	params := []string{"$2", "$1"}
	sets := []string{id.token + " = EXCLUDED." + id.token}
	for i, col := range cols {
		qc, err := quoteIdent(col)
		if err != nil {
			return err
		}
		names = append(names, qc)
		params = append(params, "$"+strconv.Itoa(i+3))
		sets = append(sets, qc+" = EXCLUDED."+qc)
	}
	return o.exec(ctx, q, "upsert", `INSERT INTO `+id.table+` AS r (`+strings.Join(names, ", ")+`) VALUES (`+strings.Join(params, ", ")+`)
ON CONFLICT (`+id.key+`) DO UPDATE SET `+strings.Join(sets, ", ")+`
WHERE r.`+id.token+` <= EXCLUDED.`+id.token, vals...)
}

// Highest returns the fence stored on key's row; ErrNotFound if no row.
func (c SQLColumn) Highest(ctx context.Context, q Querier, key any) (dlock.Token, error) {
	id, err := c.idents()
	if err != nil {
		return 0, err
	}
	return c.highest(ctx, q, id, key)
}

func (c SQLColumn) highest(ctx context.Context, q Querier, id columnIdents, key any) (dlock.Token, error) {
	var v int64
	err := q.QueryRowContext(ctx, `SELECT `+id.token+` FROM `+id.table+` WHERE `+id.key+` = $1`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("%w: no row with %s = %v in %s", ErrNotFound, id.key, key, id.table)
	}
	if err != nil {
		return 0, fmt.Errorf("fence: read fence of %v: %w", key, err)
	}
	return dlock.Token(v), nil
}

// refused explains why a fenced statement touched no row. The decision was
// the statement itself; this reads the row only to say why.
func (o rowOp) refused(ctx context.Context, q Querier) error {
	h, err := o.c.highest(ctx, q, o.id, o.key)
	if err != nil {
		return err
	}
	if h > o.token {
		return &StaleError{Resource: o.res, Token: o.token, Highest: h}
	}
	// The row was created, or its fence lowered by hand, after the
	// statement ran: nothing was there for it to act on.
	return fmt.Errorf("%w: no row with %s = %v in %s when the statement ran", ErrNotFound, o.id.key, o.key, o.id.table)
}
