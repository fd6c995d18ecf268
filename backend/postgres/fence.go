package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// Fence checks, inside a transaction of the caller's, that a hold is still
// the current lease of its key in a lease table: the lock check and the
// fenced statements then commit together or not at all, on the same
// database. It is the strongest fencing there is: a holder paused past its
// lease cannot commit a write once another holder has the key, and no
// holder can take the key while a transaction that passed the check is
// open.
//
// Check reads the key's lease row with SELECT ... FOR SHARE, which locks it
// until the transaction ends. A takeover (or a renewal) is an UPDATE of
// that row, so it waits for the transaction: if the lease runs out while
// the transaction is still open, the next holder acquires only after it
// has committed or rolled back, and so after its writes. A transaction that
// comes second finds the row changed and fails the check. Under READ
// COMMITTED, PostgreSQL's default, the row read is the latest committed
// version; under REPEATABLE READ or SERIALIZABLE a row changed since the
// transaction's snapshot makes the check fail with a serialization error,
// to be retried as usual.
//
// The holder's renewals wait for such a transaction too: keep fenced
// transactions short compared with the lease.
type Fence struct {
	n names
}

// NewFence returns the Fence of the lease table o names (nil: DefaultTable).
// With no Schema, the table is found through the transaction's search_path.
// It does not talk to the server.
func NewFence(c Config) (*Fence, error) {
	cfg, err := c.normalize()
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %v", dlock.ErrInvalidOption, err)
	}
	n := newNames(cfg.Schema, cfg.Table)
	if cfg.Schema == "" {
		n.tableQ = pgx.Identifier{cfg.Table}.Sanitize()
	}
	return &Fence{n: n}, nil
}

// Querier runs a query; pgx.Tx is one.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts a transaction: *pgxpool.Pool, *pgx.Conn and pgx.Tx (a
// savepoint) are.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Check returns nil if token is the current, unexpired lease of key on the
// server's clock, and locks the lease row until tx ends. Otherwise it
// returns an error matching dlock.ErrLockLost, and also fence.ErrStale (a
// *fence.StaleError) when a newer holder has the key. A token of 0 (no lock
// held) is fence.ErrNoToken. Call it in the transaction whose statements
// it protects, before them; outside a transaction it protects nothing.
func (f *Fence) Check(ctx context.Context, tx Querier, key string, token dlock.Token) error {
	if token == 0 {
		return fmt.Errorf("%w (key %q): take the lock first and pass Mutex.Token()", fence.ErrNoToken, key)
	}
	if token > math.MaxInt64 {
		return fmt.Errorf("%w: token %d for key %q", fence.ErrTokenRange, token, key)
	}
	var (
		current int64
		live    bool
	)
	err := tx.QueryRow(ctx, `SELECT token, expires > clock_timestamp() FROM `+f.n.tableQ+` WHERE key_hash = $1 FOR SHARE`,
		keyHash(key)).Scan(&current, &live)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: key %q has no lease in %s", dlock.ErrLockLost, key, f.n.tableQ)
	case err != nil:
		return fmt.Errorf("postgres: fence check of %q: %w", key, mapErr(ctx, err))
	case dlock.Token(current) > token:
		return fmt.Errorf("%w: %w", dlock.ErrLockLost, &fence.StaleError{Resource: key, Token: token, Highest: dlock.Token(current)})
	case dlock.Token(current) != token:
		return fmt.Errorf("%w: key %q: token %d is not the current lease's (%d)", dlock.ErrLockLost, key, token, current)
	case !live:
		return fmt.Errorf("%w: the lease of key %q (token %d) has expired", dlock.ErrLockLost, key, token)
	}
	return nil
}

// Tx runs fn in a transaction on db whose first statement is Check, and
// commits if fn returns nil. If the check fails, fn does not run and Tx
// returns the check's error; if fn fails, the transaction is rolled back
// and fn's error returned.
func (f *Fence) Tx(ctx context.Context, db Beginner, key string, token dlock.Token, fn func(tx pgx.Tx) error) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", mapErr(ctx, err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := f.Check(ctx, tx, key, token); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres: commit: %w", mapErr(ctx, err))
	}
	return nil
}
