package file

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*fileDriver)(nil)

// TokenCeiling reads every state file of the directory (no other file), without its flock,
// and returns the highest token found, or the clock in microseconds if it
// is higher: a key's token is max(its last token + 1, the clock), so a
// token issued before the call is at most that. A grant racing with the
// scan may go one above a file already read; the caller's headroom covers
// it.
func (d *fileDriver) TokenCeiling(ctx context.Context) (uint64, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		return 0, unavailable(d.dir, "read directory", err)
	}
	ceiling := uint64(time.Now().UnixMicro())
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if !isStateName(e.Name()) || !e.Type().IsRegular() {
			// Only state files: a doorbell of the line is a named pipe,
			// whose open for reading waits for a writer (the scan hung
			// for as long as a waiter waited), and queue and record
			// files hold no token.
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.dir, e.Name()))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return 0, unavailable(e.Name(), "read", err)
		}
		s, err := parseState(b)
		if err != nil {
			continue // a record, or a file that is not a lock's
		}
		ceiling = max(ceiling, s.token)
	}
	return ceiling, nil
}

// isStateName reports whether name can be a key's state file (fileName).
func isStateName(name string) bool {
	return (strings.HasPrefix(name, "k-") || strings.HasPrefix(name, "h-")) && strings.HasSuffix(name, ".lock")
}
