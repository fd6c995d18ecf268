package etcd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
)

// renewWatch counts, from the client's side of the wire, keepalives that
// have been answered and not yet followed by a read: a renewal is a
// keepalive and then a linearizable read whose raft term confirms it
// (etcd's extension), so more than one at a time means one goroutine's
// read could confirm another goroutine's keepalive.
type renewWatch struct {
	open, most atomic.Int32
}

func (w *renewWatch) keptAlive() {
	n := w.open.Add(1)
	for m := w.most.Load(); n > m && !w.most.CompareAndSwap(m, n); m = w.most.Load() {
	}
	// Give a renewal running beside this one the time to get its own
	// keepalive answered, if nothing keeps it waiting.
	time.Sleep(30 * time.Millisecond)
}

func (w *renewWatch) read() {
	for n := w.open.Load(); n > 0 && !w.open.CompareAndSwap(n, n-1); n = w.open.Load() {
	}
}

type keepAliveStream struct {
	grpc.ClientStream
	w *renewWatch
}

func (s keepAliveStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.w.keptAlive()
	}
	return err
}

// A caller's Renew racing another Renew of the same hold (as the watchdog's
// does) must not interleave with it: each keepalive is confirmed by the
// read that follows it before the next renewal sends its own. The renewals
// all succeed and never overlap.
func TestRenewalsOfOneHoldTakeTurns(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	w := &renewWatch{}
	cfg := e.cfg
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
				return s, err
			}
			return keepAliveStream{s, w}, nil
		}),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if method == "/etcdserverpb.KV/Range" {
				w.read()
			}
			return err
		}))
	l := e.lockerOn(t, cfg)
	// No watchdog: the test's own goroutines are the two renewers.
	m, err := l.NewMutex("renew-turns", dlock.WithTTL(5*time.Second), dlock.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, time.Minute)
	if err := m.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(context.Background())
	const rounds = 10
	var wg sync.WaitGroup
	errs := make(chan error, 2*rounds)
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				if err := m.Renew(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Renew: %v", err)
	}
	if n := w.most.Load(); n != 1 {
		t.Fatalf("%d keepalives of one hold were answered and unconfirmed at once; want renewals one at a time", n)
	}
}
