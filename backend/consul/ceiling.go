package consul

import (
	"context"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*consulDriver)(nil)

// ceilingKey is the lock key whose KV entry TokenCeiling writes and
// deletes: a key under the prefix moves reserve (docs/moving.md).
const ceilingKey = "dlock-move/ceiling"

// TokenCeiling writes a scratch KV entry and reads it back: its
// ModifyIndex is the Raft index of that write, above every index written
// before, so above every token (a token is the ModifyIndex of a lock's
// write). The entry is deleted again.
func (d *consulDriver) TokenCeiling(ctx context.Context) (uint64, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	path := d.path(ceilingKey)
	kv := d.c.KV()
	if _, err := kv.Put(&api.KVPair{Key: path, Value: []byte("token ceiling")}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return 0, mapErr(ctx, "token ceiling", err)
	}
	pair, _, err := kv.Get(path, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return 0, mapErr(ctx, "token ceiling", err)
	}
	_, _ = kv.Delete(path, (&api.WriteOptions{}).WithContext(ctx))
	if pair == nil {
		return 0, mapErr(ctx, "token ceiling", errScratchGone)
	}
	return pair.ModifyIndex, nil
}

// errScratchGone: the scratch entry was deleted before it was read back.
var errScratchGone = driver.Unavailable(errString("the scratch entry was deleted before it was read"))

type errString string

func (e errString) Error() string { return string(e) }
