package etcd

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dlock-go/dlock/driver"
)

// countingDriver is testDriver on a client that counts the keepalives it
// sends.
func countingDriver(t *testing.T) (*drv, *atomic.Int64) {
	t.Helper()
	kas := new(atomic.Int64)
	d := testDriverWith(t, grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
		streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if method == "/etcdserverpb.Lease/LeaseKeepAlive" {
			kas.Add(1)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}))
	return d, kas
}

// Renewal batches of one shared lease that fall due together share its
// keepalive: the portable layer hands a Locker's due holds to RenewBatch
// in batches of 1,024, run side by side, and 100,000 holds at a 3 s TTL
// make about a hundred batches a second. When each sent its own
// keepalive, one after the other on the lease's renewal turn, a round
// outlasted what was left of the lease and most holds were lost. Each
// batch's validity must still count from a keepalive sent after it asked.
func TestConcurrentBatchesShareAKeepalive(t *testing.T) {
	d, kas := countingDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const batches = 16
	hs := make([]driver.Hold, batches)
	for i := range hs {
		h, err := d.TryAcquire(ctx, driver.Request{Key: "round-" + strconv.Itoa(i), TTL: 5 * time.Second, Owner: owner()})
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	l := hs[0].State.(*hold).lease()
	if !l.shared {
		t.Fatal("the holds are not on a shared lease")
	}
	time.Sleep(50 * time.Millisecond)
	k0 := kas.Load()
	asked := time.Now()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, batches)
	for i := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ttls, es := d.RenewBatch(ctx, hs[i:i+1])
			switch {
			case es[0] != nil:
				errs <- es[0]
			case ttls[0] <= 0:
				errs <- errors.New("no TTL granted")
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("RenewBatch: %v", err)
	}
	// A batch that asks once a round has been sent waits for the next
	// one, so the count depends on how the 16 goroutines are scheduled: on
	// a loaded machine they reach RenewBatch over a few rounds (3 were seen
	// under the whole suite with -race). One keepalive per batch, 16, is
	// what must not happen.
	if used := kas.Load() - k0; used > batches/4 {
		t.Fatalf("%d renewal batches of one shared lease sent %d keepalives; want them to share a few (%d at most)", batches, used, batches/4)
	}
	if since, _ := l.state(); since.Before(asked) {
		t.Fatalf("the lease counts from a keepalive sent %v before the batches asked for one", asked.Sub(since))
	}
}

// A caller waiting for a keepalive round that another caller started does
// not inherit that caller's cancellation: the round ends with the other
// caller's context error, and the waiter runs a round of its own.
func TestSharedRoundOutlivesItsCallersContext(t *testing.T) {
	d, _ := countingDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := d.TryAcquire(ctx, driver.Request{Key: "round", TTL: 5 * time.Second, Owner: owner()})
	if err != nil {
		t.Fatal(err)
	}
	l := h.State.(*hold).lease()
	// Hold the renewal turn so that the first round waits for it.
	if err := l.take(ctx); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	actx, acancel := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() { _, err := d.leases.refresh(actx, l, time.Now()); first <- err }()
	for {
		l.mu.Lock()
		r := l.round
		l.mu.Unlock()
		if r != nil && !r.start.Before(asked) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	second := make(chan error, 1)
	go func() { _, err := d.leases.refresh(ctx, l, asked); second <- err }()
	time.Sleep(20 * time.Millisecond) // the second caller joins the round
	acancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first round: %v; want its caller's context.Canceled", err)
	}
	l.give()
	if err := <-second; err != nil {
		t.Fatalf("a caller that joined a round cancelled by its starter: %v; want a round of its own", err)
	}
}

// A renewal round reads the entries of up to maxTxnOps holds in one
// transaction. With keys of the longest kind (driver.MaxKeyLen bytes, each
// escaped to three) that read is about 1.6 MB: under the client's 2 MiB
// limit on a request, and a read is not held to etcd's 1.5 MiB limit on
// proposals. Every hold of the round must be renewed.
func TestLongestKeysRenew(t *testing.T) {
	d := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hs := holdKeys(ctx, t, d, strings.Repeat("\xff", driver.MaxKeyLen-8), maxTxnOps)
	ttls, errs := d.RenewBatch(ctx, hs)
	for i := range hs {
		if errs[i] != nil || ttls[i] <= 0 {
			t.Fatalf("hold %d: renewal %v, TTL %v; want it renewed", i, errs[i], ttls[i])
		}
	}
}
