package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*redisDriver)(nil)

// counterLead bounds how far a key's fencing counter can run ahead of the
// server's clock: a token is max(counter + 1, TIME in µs), so a counter
// leads the clock only by the acquisitions of one key that came faster
// than one per microsecond, summed over its life; 2^32 of them is far
// beyond what a server can serve.
const counterLead = 1 << 32

// TokenCeiling returns the server's clock in microseconds (the highest of
// the Cluster's primaries) plus counterLead: every token is max(counter +
// 1, TIME), so none issued before the call is above that, as long as the
// clock has not stepped back (the assumption the tokens already make).
func (d *redisDriver) TokenCeiling(ctx context.Context) (uint64, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	var (
		mu      sync.Mutex
		highest uint64
	)
	read := func(ctx context.Context, c goredis.Cmdable) error {
		t, err := c.Time(ctx).Result()
		if err != nil {
			return mapErr(err)
		}
		mu.Lock()
		highest = max(highest, uint64(t.UnixMicro()))
		mu.Unlock()
		return nil
	}
	var err error
	if cc, ok := d.client.(*goredis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error { return read(ctx, c) })
	} else {
		err = read(ctx, d.client)
	}
	if err != nil {
		return 0, err
	}
	return highest + counterLead, nil
}
