package etcd

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dlock-go/dlock/driver"
)

// peerDriver opens another driver, with a client of its own, on d's
// prefix: another process contending for d's keys.
func peerDriver(t *testing.T, d *drv) *drv {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: d.cli.Endpoints(), DialTimeout: DefaultDialTimeout})
	if err != nil {
		t.Fatal(err)
	}
	p := newDriver(cli, Config{Prefix: d.prefix}, true)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// A lapsing hold keeps its key held for d after ReleaseAfter, also once
// its driver is closed (which revokes the driver's leases), then frees it:
// a waiter blocked in Acquire is granted.
func TestReleaseAfterHoldsThenFrees(t *testing.T) {
	t.Run("shared", func(t *testing.T) { testReleaseAfterHoldsThenFrees(t, false) })
	t.Run("per-hold", func(t *testing.T) { testReleaseAfterHoldsThenFrees(t, true) })
}

func testReleaseAfterHoldsThenFrees(t *testing.T, perHold bool) {
	d1 := testDriver(t)
	if perHold { // Config.LeasePerHold, before any lease is granted
		d1.leases = newLeasePool(d1.cli, false)
	}
	d2 := peerDriver(t, d1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := driver.Request{Key: "lapse", TTL: 10 * time.Second, Owner: owner()}
	h, err := d1.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	const lapse = 3 * time.Second
	start := time.Now()
	if err := d1.ReleaseAfter(ctx, h, lapse); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	if err := d1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	other := driver.Request{Key: "lapse", TTL: 10 * time.Second, Owner: owner()}
	if _, err := d2.TryAcquire(ctx, other); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("TryAcquire during the lapse, after the releasing driver closed: %v; want ErrNotAcquired", err)
	}
	h2, err := d2.Acquire(ctx, other)
	if err != nil {
		t.Fatalf("Acquire after the lapse: %v", err)
	}
	if took := time.Since(start); took < lapse {
		t.Fatalf("granted %v after ReleaseAfter(%v): the lapse ended early", took, lapse)
	}
	if h2.Token <= h.Token {
		t.Fatalf("token %d after the lapse, not above the lapsed hold's %d", h2.Token, h.Token)
	}
	if err := d2.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// The Locker that let a hold lapse can queue for the same key during the
// lapse (its shared lease would give its entry the lapsing entry's name):
// it waits, and is granted once the lapse ends.
func TestReleaseAfterSameLockerWaits(t *testing.T) {
	d := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := driver.Request{Key: "again", TTL: 10 * time.Second, Owner: owner()}
	h, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	const lapse = 2 * time.Second
	start := time.Now()
	if err := d.ReleaseAfter(ctx, h, lapse); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	req.Owner = owner()
	if _, err := d.TryAcquire(ctx, req); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("TryAcquire during the lapse: %v; want ErrNotAcquired", err)
	}
	h2, err := d.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("Acquire during the lapse: %v", err)
	}
	if took := time.Since(start); took < lapse {
		t.Fatalf("granted %v after ReleaseAfter(%v): the lapse ended early", took, lapse)
	}
	if err := d.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// When ReleaseAfter cannot move the entry onto a lease of its own (here
// the lease grant fails), the entry lapses in place on the Locker's shared
// lease, under the name the Locker's next entry for the key would take.
// It is still the lapsing hold's, not an orphan: the same Locker's TryLock
// must not delete it and take the key, another Locker's must be refused,
// and the same Locker's Lock must queue behind it (on a lease of its own)
// and be granted once the lapse has ended, not fail on the taken name.
func TestReleaseAfterInPlaceKeepsTheKey(t *testing.T) {
	var failGrant atomic.Bool
	d := testDriverWith(t, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
		cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.Lease/LeaseGrant" && failGrant.Load() {
			return status.Error(codes.Internal, "grant refused by the test")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}))
	peer := peerDriver(t, d)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := driver.Request{Key: "in-place", TTL: 10 * time.Second, Owner: owner()}
	h, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if !h.State.(*hold).lease().shared {
		t.Fatal("the hold is not on the shared lease")
	}
	const lapse = 3 * time.Second
	start := time.Now()
	failGrant.Store(true)
	err = d.ReleaseAfter(ctx, h, lapse)
	failGrant.Store(false)
	if err == nil {
		t.Fatal("ReleaseAfter with the grant refused: nil error; want the refusal")
	}
	req.Owner = owner()
	if h2, err := d.TryAcquire(ctx, req); !errors.Is(err, driver.ErrNotAcquired) {
		if err == nil {
			_ = d.Release(ctx, h2)
		}
		t.Fatalf("the same Locker's TryAcquire during the lapse: %v; want ErrNotAcquired", err)
	}
	if _, err := peer.TryAcquire(ctx, driver.Request{Key: "in-place", TTL: 10 * time.Second, Owner: owner()}); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("another Locker's TryAcquire during the lapse: %v; want ErrNotAcquired", err)
	}
	if since := time.Since(start); since >= lapse {
		t.Fatalf("the checks ran %v after ReleaseAfter(%v): too late to check the lapse", since, lapse)
	}
	h2, err := d.Acquire(ctx, req)
	if err != nil {
		t.Fatalf("the same Locker's Acquire during the lapse: %v", err)
	}
	if took := time.Since(start); took < lapse {
		t.Fatalf("granted %v after ReleaseAfter(%v): the lapse ended early", took, lapse)
	}
	if h2.Token <= h.Token {
		t.Fatalf("token %d after the lapse, not above the lapsed hold's %d", h2.Token, h.Token)
	}
	if err := d.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// ReleaseAfter of a hold broken from outside changes nothing: the key's
// next holder keeps its entry, on its own lease, and the call says
// ErrNotHeld.
func TestReleaseAfterBroken(t *testing.T) {
	d1 := testDriver(t)
	d2 := peerDriver(t, d1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := d1.TryAcquire(ctx, driver.Request{Key: "broken", TTL: 10 * time.Second, Owner: owner()})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := d2.Break(ctx, "broken"); err != nil {
		t.Fatalf("Break: %v", err)
	}
	h2, err := d2.TryAcquire(ctx, driver.Request{Key: "broken", TTL: 10 * time.Second, Owner: owner()})
	if err != nil {
		t.Fatalf("TryAcquire after Break: %v", err)
	}
	if err := d1.ReleaseAfter(ctx, h, 3*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("ReleaseAfter of a broken hold: %v; want ErrNotHeld", err)
	}
	e2 := h2.State.(*hold)
	resp, err := d2.cli.Get(ctx, e2.key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != e2.rev || clientv3.LeaseID(resp.Kvs[0].Lease) != e2.lease().id {
		t.Fatalf("the next holder's entry was changed by a stale ReleaseAfter: %v", resp.Kvs)
	}
	if n, err := d2.cli.Get(ctx, e2.queue, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || n.Count != 1 {
		t.Fatalf("the queue holds %v entries (%v) after a stale ReleaseAfter; want the next holder's only", n.Count, err)
	}
	if err := d2.Release(ctx, h2); err != nil {
		t.Fatalf("Release of the next holder: %v", err)
	}
}
