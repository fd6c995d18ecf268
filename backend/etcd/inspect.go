package etcd

import (
	"context"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Inspector = (*drv)(nil)

// entryValue is what a queue entry holds: the hold's owner ID and, after a
// newline, its description (Request.Meta).
func entryValue(req driver.Request) string { return req.Owner + "\n" + req.Meta }

// metaOf returns the description in a queue entry's value ("" for an entry
// written before descriptions were stored).
func metaOf(v []byte) string {
	_, meta, _ := strings.Cut(string(v), "\n")
	return meta
}

// Inspect reads key's queue in one transaction: its oldest entry (the
// holder: token = its create revision, description from its value) and how
// many entries there are; then the holder's lease for the time left
// (whole seconds, as etcd reports it). Waiters is the number of entries
// behind the holder. It writes nothing.
func (d *drv) Inspect(ctx context.Context, key string) (_ driver.Info, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return driver.Info{}, err
	}
	defer leave(&err)
	info, _, err := d.inspect(ctx, key)
	return info, err
}

// Break deletes the holder's entry of key's queue, guarded by its create
// revision, and leaves the waiters queued: the oldest of them is granted
// (its predecessor watch sees the deletion), with a higher token (a later
// create revision). The broken holder's loss watch sees the deletion too
// and closes its Done; failing that, its next renewal finds the entry gone.
// The holder's lease is left alone: it backs nothing else of the holder's.
func (d *drv) Break(ctx context.Context, key string) (_ driver.Info, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return driver.Info{}, err
	}
	defer leave(&err)
	for {
		info, holder, err := d.inspect(ctx, key)
		if err != nil || !info.Held {
			return info, err
		}
		var resp *clientv3.TxnResponse
		err = onLeader(ctx, func(ctx context.Context) (err error) {
			resp, err = d.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(string(holder.Key)), "=", holder.CreateRevision)).
				Then(clientv3.OpDelete(string(holder.Key))).
				Commit()
			return err
		})
		if err != nil {
			return driver.Info{}, mapErr(ctx, err)
		}
		if resp.Succeeded {
			return info, nil
		}
		// The holder released (or was replaced) meanwhile: look again.
		if err := ctx.Err(); err != nil {
			return driver.Info{}, err
		}
	}
}

// inspect returns key's Info and its holder's entry (nil when free).
func (d *drv) inspect(ctx context.Context, key string) (driver.Info, *mvccpb.KeyValue, error) {
	q := d.queue(key)
	var resp *clientv3.TxnResponse
	err := onLeader(ctx, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).Then(
			clientv3.OpGet(q, clientv3.WithFirstCreate()...),
			clientv3.OpGet(q, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		).Commit()
		return err
	})
	if err != nil {
		return driver.Info{}, nil, mapErr(ctx, err)
	}
	first := resp.Responses[0].GetResponseRange().Kvs
	count := resp.Responses[1].GetResponseRange().Count
	if len(first) == 0 {
		return driver.Info{Waiters: 0}, nil, nil
	}
	kv := first[0]
	info := driver.Info{Held: true, Token: uint64(kv.CreateRevision), Meta: metaOf(kv.Value), Waiters: int(count - 1)}
	if kv.Lease != 0 {
		ttl, err := d.cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil {
			return driver.Info{}, nil, mapErr(ctx, err)
		}
		if ttl.TTL >= 0 {
			// etcd counts whole seconds: a live lease never reads as 0.
			info.Remaining = max(time.Duration(ttl.TTL)*time.Second, time.Millisecond)
		}
	}
	return info, kv, nil
}
