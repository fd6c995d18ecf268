package file

import (
	"context"

	"github.com/dlock-go/dlock/driver"
)

// RecordIn runs one Record on a new driver over dir, as a separate process
// would.
func RecordIn(ctx context.Context, dir, key, value string) (string, error) {
	d := newDriver(dir)
	defer d.Close()
	return d.Record(ctx, key, value)
}

// NewDriver returns a driver over dir, as New's Lockers are made over.
func NewDriver(dir string) driver.Locker { return newDriver(dir) }
