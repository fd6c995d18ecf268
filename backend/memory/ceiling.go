package memory

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*memDriver)(nil)

// TokenCeiling returns the Store's counter (or the clock in microseconds,
// if it is ahead): every token the Store has issued is at most the
// counter, one for all keys.
func (d *memDriver) TokenCeiling(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	return max(d.s.seq, uint64(time.Now().UnixMicro())), nil
}
