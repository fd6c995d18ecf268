package etcd

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock/driver"
)

// txnCountingDriver is testDriver on a client that counts the
// transactions it sends.
func txnCountingDriver(t *testing.T) (*drv, *atomic.Int64) {
	t.Helper()
	txns := new(atomic.Int64)
	d := testDriverWith(t, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" {
			txns.Add(1)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	return d, txns
}

// After a leader change every hold of a Locker moves off its shared lease
// at its next renewal (see rehome). They move together, maxTxnOps entries
// to a transaction: one transaction each did not move 100,000 holds within
// their windows, and half of them were lost at a leader change. Each
// entry keeps its name and create revision (its token) and ends up on the
// new shared lease.
//
// Keys of the longest kind (driver.MaxKeyLen bytes, each escaped to
// three) make smaller batches: 128 of them would not fit in one request.
func TestRetiredSharedLeaseMovesHoldsInBatches(t *testing.T) {
	t.Run("short-keys", func(t *testing.T) {
		retiredLeaseMoves(t, "batch-move-", int64((300+maxTxnOps-1)/maxTxnOps))
	})
	t.Run("longest-keys", func(t *testing.T) {
		long := strings.Repeat("\xff", driver.MaxKeyLen-8)
		retiredLeaseMoves(t, long, 0)
	})
}

// retiredLeaseMoves holds 300 keys named prefix and a number on one shared
// lease, retires the lease and renews them: each must be moved, in
// exactly wantTxns transactions when that is not 0, else in fewer than one
// each.
func retiredLeaseMoves(t *testing.T, prefix string, wantTxns int64) {
	d, txns := txnCountingDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 300
	hs := holdKeys(ctx, t, d, prefix, n)
	old := hs[0].State.(*hold).lease()
	if !old.shared {
		t.Fatal("the holds are not on a shared lease")
	}
	for i, h := range hs {
		if h.State.(*hold).lease() != old {
			t.Fatalf("hold %d is on another lease", i)
		}
	}
	// What a response of a later raft term does to the lease (see
	// lease.confirm).
	old.mu.Lock()
	old.retired = true
	old.mu.Unlock()
	d.leases.dead(old)

	before := txns.Load()
	ttls, errs := d.RenewBatch(ctx, hs)
	moves := txns.Load() - before
	for i := range hs {
		if errs[i] != nil || ttls[i] <= 0 {
			t.Fatalf("hold %d: renewal %v, TTL %v; want it moved and renewed", i, errs[i], ttls[i])
		}
	}
	nl := hs[0].State.(*hold).lease()
	if nl == old || !nl.shared || nl.isRetired() {
		t.Fatal("the holds were not moved onto a live shared lease")
	}
	switch {
	case wantTxns > 0 && moves != wantTxns:
		t.Errorf("%d transactions moved %d holds; want %d (%d entries each)", moves, n, wantTxns, maxTxnOps)
	case moves >= n:
		t.Errorf("%d transactions moved %d holds; want them moved in batches", moves, n)
	}
	for i, h := range hs {
		s := h.State.(*hold)
		if s.lease() != nl {
			t.Fatalf("hold %d is on lease %x; want the new shared lease %x", i, s.lease().id, nl.id)
		}
		resp, err := d.cli.Get(ctx, s.key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != s.rev || clientv3.LeaseID(resp.Kvs[0].Lease) != nl.id {
			t.Fatalf("hold %d's entry: %v; want create revision %d on lease %x", i, resp.Kvs, s.rev, nl.id)
		}
	}
	// The old lease carries nothing any more; the new one every hold.
	d.leases.mu.Lock()
	oldRefs, newRefs := old.refs, nl.refs
	d.leases.mu.Unlock()
	if oldRefs != 0 || newRefs < n {
		t.Errorf("entries counted on the old lease %d, on the new %d; want 0 and at least %d", oldRefs, newRefs, n)
	}
}

// holdKeys takes n keys named prefix and a number through d, with a 10 s
// lease each, and releases them when t ends.
func holdKeys(ctx context.Context, t *testing.T, d *drv, prefix string, n int) []driver.Hold {
	t.Helper()
	hs := make([]driver.Hold, 0, n)
	t.Cleanup(func() {
		for _, h := range hs {
			_ = d.Release(context.Background(), h)
		}
	})
	for i := range n {
		h, err := d.TryAcquire(ctx, driver.Request{Key: prefix + strconv.Itoa(i), TTL: 10 * time.Second, Owner: owner()})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}
