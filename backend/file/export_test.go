package file

import "context"

// RecordIn runs one Record on a new driver over dir, as a separate process
// would.
func RecordIn(ctx context.Context, dir, key, value string) (string, error) {
	d := newDriver(dir)
	defer d.Close()
	return d.Record(ctx, key, value)
}
