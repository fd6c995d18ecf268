package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

func (e *env) harness() conformance.Harness {
	return conformance.Harness{
		URL:    e.raw,
		CutOff: conformance.CutOffURL(e.raw),
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return openLocker(ctx, e.raw, opts...)
		},
		NewDriver: func(ctx context.Context) (driver.Locker, error) {
			return openRaw(ctx, e.raw)
		},
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			return dlock.Open(ctx, "postgres://dlock:dlock@"+addr+"/dlock?sslmode=disable&table="+e.table)
		},
		BreakLease: func(ctx context.Context, key string) error {
			tag, err := e.admin.Exec(ctx, `DELETE FROM `+e.names().tableQ+` WHERE key_hash = $1`, keyHash(key))
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("lease row of %q not found", key)
			}
			return nil
		},
		TTL: time.Second,
		// The server's lease starts when the statement runs, a little
		// after the client sent it.
		ExpiryGrace: 50 * time.Millisecond,
	}
}

func TestConformance(t *testing.T) {
	conformance.Run(t, newEnv(t).harness())
}
