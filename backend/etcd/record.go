package etcd

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Recorder = (*drv)(nil)

// recordDir is the part of a Locker's prefix that holds the records. An
// escaped key writes "%" only before two upper-case hex digits, so no queue
// (P + escape(key) + "/") starts with P + "%records/", and no record name
// starts with a queue's prefix: records and lock entries never meet.
const recordDir = "%records/"

// record returns the etcd key of key's record.
func (d *drv) record(key string) string { return d.prefix + recordDir + escape(key) }

// Record writes key's record with one transaction: if the record's create
// revision is 0 (it does not exist), put value, without a lease; else read
// it. etcd serialises transactions, so of concurrent calls exactly one
// puts and every other reads its value. The transaction is safe to send
// again after an answer that was lost: a second attempt reads what the
// first wrote.
func (d *drv) Record(ctx context.Context, key, value string) (_ string, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return "", err
	}
	defer leave(&err)
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	rk := d.record(key)
	var resp *clientv3.TxnResponse
	err = retry(ctx, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(rk), "=", 0)).
			Then(clientv3.OpPut(rk, value)).
			Else(clientv3.OpGet(rk)).
			Commit()
		return err
	})
	if err != nil {
		return "", mapErr(ctx, err)
	}
	if resp.Succeeded {
		return value, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		// The compare found the record and the read, in the same
		// transaction, did not: not an answer etcd gives.
		return "", driver.Unavailable(fmt.Errorf("etcd: record %q: transaction read no record after finding one", rk))
	}
	return string(kvs[0].Value), nil
}

// ClearRecord deletes key's record with one transaction guarded by its
// value. It is sent once (again only when a member refuses it for want of
// a leader, which applies nothing): after an answer that was lost, a
// second attempt could not tell its own deletion from none.
func (d *drv) ClearRecord(ctx context.Context, key, value string) (_ bool, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return false, err
	}
	defer leave(&err)
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("etcd: %w", err)
	}
	rk := d.record(key)
	var resp *clientv3.TxnResponse
	err = onLeader(ctx, func(ctx context.Context) (err error) {
		resp, err = d.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.Value(rk), "=", value)).
			Then(clientv3.OpDelete(rk)).
			Commit()
		return err
	})
	if err != nil {
		return false, mapErr(ctx, err)
	}
	return resp.Succeeded, nil
}
