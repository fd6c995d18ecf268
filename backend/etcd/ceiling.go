package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.TokenCeiling = (*drv)(nil)

// TokenCeiling returns the cluster's current revision, read from the
// leader: a token is the create revision of a queue entry, and every
// revision already written is at most the current one.
func (d *drv) TokenCeiling(ctx context.Context) (uint64, error) {
	ctx, exit, err := d.enter(ctx)
	if err != nil {
		return 0, err
	}
	defer exit(&err)
	var rev int64
	err = onLeader(ctx, func(ctx context.Context) error {
		resp, err := d.cli.Get(ctx, d.prefix, clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		return nil
	})
	if err != nil {
		err = mapErr(ctx, err)
		return 0, err
	}
	return uint64(rev), nil
}
