package file

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Break ends key's current hold in the lock directory dir from outside, as
// an operator would: the state file is marked free (its token counter is
// kept), waiters are woken, and the holder learns of the loss at its next
// renewal. It reports whether the key was held.
func Break(ctx context.Context, dir, key string) (bool, error) {
	info, err := inspect(ctx, filepath.Join(dir, fileName(key)), key, true)
	return info.Held, err
}

// inspect reads key's state file at path and, with brk, marks a live hold
// free (keeping the token counter), under the file's flock.
func inspect(ctx context.Context, path, key string, brk bool) (driver.Info, error) {
	var info driver.Info
	err := update(ctx, path, false, func(s *state, now time.Time) (bool, error) {
		if err := checkKey(path, s, key); err != nil {
			return false, err
		}
		if !s.heldAt(now) {
			return false, nil
		}
		info.Held, info.Token, info.Remaining, info.Meta = true, s.token, s.remaining(now), s.meta
		if !brk {
			return false, nil
		}
		s.owner, s.expires, s.meta = "", 0, ""
		return true, nil
	})
	if errors.Is(err, errNoFile) {
		return driver.Info{}, nil
	}
	if err == nil {
		info.Waiters, err = lineLen(filepath.Join(filepath.Dir(path), queueName(key)))
	}
	if err != nil {
		op := "inspect"
		if brk {
			op = "break"
		}
		return driver.Info{}, fmt.Errorf("file: %s %q: %w", op, key, err)
	}
	return info, nil
}

// Inspect reports key's state file, writing nothing: an expired lease
// reads as free.
func (d *fileDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	return inspect(ctx, d.path(key), key, false)
}

// Break marks key's state file free as the package's Break does; the
// holder's next renewal finds another owner (none) and reports the loss.
func (d *fileDriver) Break(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	return inspect(ctx, d.path(key), key, true)
}

// Path returns the state file of key in the lock directory dir.
func Path(dir, key string) string { return filepath.Join(dir, fileName(key)) }
