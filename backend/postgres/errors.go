package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dlock-go/dlock/driver"
)

// ErrNotALockTable: the table named for the leases exists but lacks the
// columns this backend uses (key_hash, key, owner, token, metadata,
// expires). Nothing is changed; pick another table name or schema.
var ErrNotALockTable = errors.New("postgres: the table exists but is not a dlock lease table")

// mapErr classifies a pgx error for the portable layer: the caller's
// context errors as they are (a deadline of pgx's own, connect_timeout, is
// an outage); errors that mean the server could not serve
// now (connection lost or refused, shutting down, starting up, too many
// connections, a read-only standby, a statement or lock timeout, a
// deadlock) as driver.ErrUnavailable; other server errors as plain errors;
// everything that is not a server error (network, closed pool, connect
// failures) as driver.ErrUnavailable.
func mapErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if transient(pe.Code) {
			return driver.Unavailable(err)
		}
		return fmt.Errorf("postgres: %w", err)
	}
	return driver.Unavailable(err)
}

// transient reports whether a SQLSTATE means "not now" rather than "never".
func transient(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", // connection exception
		"53", // insufficient resources (too many connections, out of memory, disk full)
		"58": // system error
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03", // admin shutdown, crash shutdown, cannot connect now
		"57014",          // query canceled (statement_timeout)
		"55P03",          // lock not available (lock_timeout)
		"40001", "40P01", // serialization failure, deadlock detected
		"25006": // read-only transaction (a standby)
		return true
	}
	return false
}

// answered reports whether err is the server's answer to a statement,
// which means the statement's transaction did not commit. A FATAL error
// ends the session and may come after the commit: not an answer.
func answered(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity != "FATAL" && pe.Severity != "PANIC"
}
