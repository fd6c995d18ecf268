package etcd

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock/driver"
)

// A resync of the loss watch judges only the holds its read can show. A
// hold granted while the read was on its way has an entry created after
// the read's revision, which the read does not show: it used to be
// declared lost (a false ErrLockLost). Here the test holds the read's
// answer back while a hold is granted. A hold whose entry was deleted
// before the read is still lost.
func TestResyncSparesAHoldGrantedDuringItsRead(t *testing.T) {
	var (
		prefix  atomic.Pointer[string]
		armed   atomic.Bool
		read    = make(chan int64, 1)
		proceed = make(chan struct{})
	)
	d := testDriverWith(t, grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if p := prefix.Load(); err == nil && p != nil && method == "/etcdserverpb.KV/Range" {
			if rr, ok := req.(*etcdserverpb.RangeRequest); ok && string(rr.Key) == *p && len(rr.RangeEnd) > 0 && armed.CompareAndSwap(true, false) {
				read <- reply.(*etcdserverpb.RangeResponse).Header.Revision
				<-proceed
			}
		}
		return err
	}))
	prefix.Store(&d.prefix)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// No loss watch: the resync alone judges the holds.
	d.loss.mu.Lock()
	d.loss.armed = true
	d.loss.mu.Unlock()

	gone, err := d.TryAcquire(ctx, driver.Request{Key: "gone", TTL: 10 * time.Second, Owner: owner()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.Delete(ctx, gone.State.(*hold).key); err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	resynced := make(chan int64, 1)
	go func() {
		rev, _ := d.loss.resync()
		resynced <- rev
	}()
	var at int64
	select {
	case at = <-read:
	case <-ctx.Done():
		t.Fatal("the resync never read the prefix")
	}
	late, err := d.TryAcquire(ctx, driver.Request{Key: "late", TTL: 10 * time.Second, Owner: owner()})
	if err != nil {
		close(proceed)
		t.Fatal(err)
	}
	lh := late.State.(*hold)
	if lh.rev <= at {
		close(proceed)
		t.Fatalf("the late hold's entry was created at %d, not after the resync's read at %d", lh.rev, at)
	}
	close(proceed)
	if rev := <-resynced; rev != at {
		t.Fatalf("resync returned revision %d; its read was at %d", rev, at)
	}
	select {
	case <-late.Lost:
		t.Fatal("a hold granted while the resync's read was on its way was declared lost")
	default:
	}
	if !d.loss.registered(lh) {
		t.Fatal("a hold granted while the resync's read was on its way is no longer watched")
	}
	select {
	case <-gone.Lost:
	default:
		t.Fatal("a hold whose entry was deleted before the resync's read was not declared lost")
	}
	resp, err := d.cli.Get(ctx, lh.key)
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != lh.rev {
		t.Fatalf("the late hold's entry: %v, %v", err, resp)
	}
	if err := d.Release(ctx, late); err != nil {
		t.Fatalf("Release of the late hold: %v", err)
	}
}
