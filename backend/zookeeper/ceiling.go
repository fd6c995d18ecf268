package zookeeper

import (
	"context"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*zkDriver)(nil)

// ceilingKey is the record TokenCeiling writes: a key under the prefix
// moves reserve (docs/moving.md).
const ceilingKey = "dlock-move/ceiling"

// TokenCeiling writes a record znode (the same data each time) and
// returns the zxid of that write: every zxid before it is lower, so is
// every token (a token is a lock node's czxid).
func (d *zkDriver) TokenCeiling(ctx context.Context) (uint64, error) {
	const data = "token ceiling"
	if _, err := d.Record(ctx, ceilingKey, data); err != nil {
		return 0, err
	}
	path := d.recordPath(ceilingKey)
	st, err := call(ctx, func() (*zk.Stat, error) { return d.conn.Set(path, []byte(data), -1) })
	if err != nil {
		return 0, d.fail("token ceiling", err)
	}
	return uint64(st.Mzxid), nil
}
