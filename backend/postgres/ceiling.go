package postgres

import (
	"context"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*pgDriver)(nil)

// TokenCeiling returns the token sequence's last_value: every token is a
// value the sequence handed out, and last_value is the highest it has
// handed out to any session (its cache included).
func (d *pgDriver) TokenCeiling(ctx context.Context) (uint64, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	var last int64
	if err := d.pool.QueryRow(ctx, `SELECT last_value FROM `+d.n.seqQ).Scan(&last); err != nil {
		return 0, mapErr(ctx, err)
	}
	return uint64(max(last, 0)), nil
}
