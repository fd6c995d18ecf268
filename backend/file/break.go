package file

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Break ends key's current hold in the lock directory dir from outside, as
// an operator would: the state file is marked free (its token counter is
// kept), waiters are woken, and the holder learns of the loss at its next
// renewal. It reports whether the key was held.
func Break(ctx context.Context, dir, key string) (bool, error) {
	path := filepath.Join(dir, fileName(key))
	held := false
	err := update(ctx, path, false, func(s *state, now time.Time) (bool, error) {
		if err := checkKey(path, s, key); err != nil {
			return false, err
		}
		held = s.heldAt(now)
		if !held {
			return false, nil
		}
		s.owner, s.expires = "", 0
		return true, nil
	})
	if errors.Is(err, errNoFile) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("file: break %q: %w", key, err)
	}
	return held, nil
}

// Path returns the state file of key in the lock directory dir.
func Path(dir, key string) string { return filepath.Join(dir, fileName(key)) }
