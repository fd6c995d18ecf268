package fence

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strings"

	"github.com/dlock-go/dlock"
)

// Querier is what the SQL checkers run their statements on: a *sql.DB, a
// *sql.Tx or a *sql.Conn.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Tx)(nil)
	_ Querier = (*sql.Conn)(nil)
)

// MaxSQLToken is the largest token the SQL checkers store: fences are
// bigint columns, and PostgreSQL's bigint is signed. Tokens above it (2^63
// and more; no backend comes near) are refused with ErrTokenRange instead of
// being wrapped to negative numbers, which would compare wrongly.
const MaxSQLToken = dlock.Token(math.MaxInt64)

// sqlToken turns a token into the bigint parameter, or the error.
func sqlToken(resource string, t dlock.Token) (int64, error) {
	if t == 0 {
		return 0, noToken(resource)
	}
	if t > MaxSQLToken {
		return 0, fmt.Errorf("%w: token %d for resource %q is above %d, the largest a bigint fence holds",
			ErrTokenRange, t, resource, MaxSQLToken)
	}
	return int64(t), nil
}

// quoteIdent quotes an SQL identifier, part by part for a qualified name
// ("app.stock" becomes "app"."stock"), so that names are never read as SQL.
func quoteIdent(name string) (string, error) {
	if name == "" {
		return "", invalid("empty SQL identifier")
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return "", invalid("bad SQL identifier %q", name)
		}
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, "."), nil
}
