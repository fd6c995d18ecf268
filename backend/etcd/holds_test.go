package etcd_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
)

// lockMany locks n keys through l, 16 at a time.
func lockMany(t *testing.T, l *dlock.Locker, n int, prefix string) []*dlock.Mutex {
	t.Helper()
	ms := make([]*dlock.Mutex, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				m, err := l.NewMutex(prefix + strconv.Itoa(i))
				if err == nil {
					err = m.Lock(context.Background())
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				ms[i] = m
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("locking %d keys: %v", n, err)
	}
	return ms
}

// Holding many keys through one Locker costs no goroutine per hold: one
// deletion watch on the Locker's prefix reports every hold's loss (it
// cost a watch and two goroutines per hold, and the portable layer a
// third), and deleting the entries from outside still closes each hold's
// Done.
func TestManyHoldsShareOneLossWatch(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			const n = 1000
			e := newEnv(t, tp.envVar)
			ctx := context.Background()
			l, err := e.newLocker(ctx, dlock.WithTTL(30*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			warm := lockMany(t, l, 1, "warm-")
			_ = warm[0].Unlock(ctx)
			time.Sleep(100 * time.Millisecond)
			g0 := runtime.NumGoroutine()
			ms := lockMany(t, l, n, "many-")
			g1 := runtime.NumGoroutine()
			if per := float64(g1-g0) / n; per > 0.01 {
				t.Fatalf("%d goroutines for %d holds (%.3f per hold); want at most 0.01", g1-g0, n, per)
			}
			// Delete every entry from outside: each Done closes.
			if _, err := e.admin.Delete(ctx, e.prefix, clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				select {
				case <-m.Done():
				case <-time.After(30 * time.Second):
					t.Fatalf("hold %s: Done not closed after its entry was deleted", m.Key())
				}
			}
		})
	}
}

// keepAliveCounter counts the keepalive streams a client opens: one per
// KeepAliveOnce.
func keepAliveCounter(e *env) (clientv3.Config, *atomic.Int64) {
	n := new(atomic.Int64)
	cfg := e.cfg
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			if method == "/etcdserverpb.Lease/LeaseKeepAlive" {
				n.Add(1)
			}
			return streamer(ctx, desc, cc, method, opts...)
		}))
	return cfg, n
}

// The holds of a Locker share one lease per TTL, kept alive once per
// renewal round for all of them: over two renewal rounds of 1,000 holds,
// a handful of keepalives, not one per hold per round (the old driver
// kept a lease per hold), and every lease moved forward.
func TestSharedLeaseOneKeepalivePerRound(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			const n = 1000
			e := newEnv(t, tp.envVar)
			cfg, kas := keepAliveCounter(e)
			_, used := twoRenewalRounds(t, e, cfg, n, "shared-", kas)
			if used > 20 {
				t.Fatalf("%d keepalives renewed %d holds over two rounds; want a few for the one shared lease", used, n)
			}
			t.Logf("%d keepalives renewed %d holds over two rounds", used, n)
		})
	}
}

// twoRenewalRounds holds n keys through a Locker on a client made from
// cfg, with a 3 s TTL, for two renewal rounds, and fails t unless every
// hold was renewed and none lost. It returns the holds and how much
// counter grew over the two rounds.
func twoRenewalRounds(t *testing.T, e *env, cfg clientv3.Config, n int, prefix string, counter *atomic.Int64) ([]*dlock.Mutex, int64) {
	t.Helper()
	l := e.lockerOn(t, cfg, dlock.WithTTL(3*time.Second))
	ms := lockMany(t, l, n, prefix)
	first := make([]time.Time, n)
	for i, m := range ms {
		first[i] = m.Lease().Expires
	}
	c0 := counter.Load()
	time.Sleep(2*time.Second + 300*time.Millisecond)
	used := counter.Load() - c0
	for i, m := range ms {
		select {
		case <-m.Done():
			t.Fatalf("hold %s lost: %v", m.Key(), m.Err())
		default:
		}
		if !m.Lease().Expires.After(first[i]) {
			t.Fatalf("hold %s never renewed", m.Key())
		}
	}
	return ms, used
}

// A shared lease that ends ends every hold on it, each with its own Done
// and ErrLockLost.
func TestSharedLeaseLossEndsEveryHold(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, time.Minute)
	l, err := e.newLocker(ctx, dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 200
	ms := lockMany(t, l, n, "lost-")
	resp, err := e.admin.Get(ctx, e.prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int64]bool{}
	for _, kv := range resp.Kvs {
		leases[kv.Lease] = true
	}
	if len(resp.Kvs) != n || len(leases) != 1 {
		t.Fatalf("%d entries on %d leases; want %d on one shared lease", len(resp.Kvs), len(leases), n)
	}
	for id := range leases {
		if _, err := e.admin.Revoke(ctx, clientv3.LeaseID(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms {
		select {
		case <-m.Done():
		case <-ctx.Done():
			t.Fatalf("hold %s: Done not closed after its shared lease was revoked", m.Key())
		}
		if !errors.Is(m.Err(), dlock.ErrLockLost) {
			t.Fatalf("hold %s: Err %v; want ErrLockLost", m.Key(), m.Err())
		}
	}
	// The Locker goes on with a new shared lease.
	m := lockMany(t, l, 1, "after-")[0]
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A hold whose owner stops renewing (autorenew off) ends on the server
// even though its lease is shared with holds that go on being renewed:
// another Locker gets the key once its validity has run out, while the
// renewed hold stays held. Without the sweep the shared keepalives kept
// the abandoned entry alive for as long as the other holds lasted.
func TestSharedLeaseDoesNotKeepAnUnrenewedHold(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, time.Minute)
	l1, err := e.newLocker(ctx, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Close()
	l2, err := e.newLocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	kept, _ := l1.NewMutex("kept")
	left, _ := l1.NewMutex("left", dlock.WithAutoRenew(false))
	if err := kept.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := left.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	other, _ := l2.NewMutex("left")
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := other.Lock(wctx); err != nil {
		t.Fatalf("another Locker never got a key whose holder stopped renewing: %v", err)
	}
	_ = other.Unlock(ctx)
	select {
	case <-kept.Done():
		t.Fatalf("the renewed hold was lost: %v", kept.Err())
	default:
	}
}

// txnCounter counts the transactions a client sends.
func txnCounter(e *env) (clientv3.Config, *atomic.Int64) {
	n := new(atomic.Int64)
	cfg := e.cfg
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == "/etcdserverpb.KV/Txn" {
				n.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	return cfg, n
}

// A renewal round of many holds on a shared lease reads the entries of
// the first transaction's worth only, to confirm the keepalive; the loss
// watch, once a progress request shows it has caught up with that read,
// vouches for the rest. Over two rounds of 1,000 holds the old driver sent
// 16 transactions of entry reads (one per 128 holds per round); now one or
// two a round. Every hold is still renewed, and one deleted from outside
// between rounds is still lost.
func TestSharedLeaseRoundReadsNotEveryEntry(t *testing.T) {
	const n = 1000
	e := newEnv(t, "DLOCK_ETCD_URL")
	cfg, txns := txnCounter(e)
	ms, used := twoRenewalRounds(t, e, cfg, n, "round-", txns)
	if used > 6 {
		t.Fatalf("%d transactions over two renewal rounds of %d holds; want one or two a round", used, n)
	}
	// An entry deleted from outside: its hold is lost, the others stay.
	victim := ms[n-1]
	resp, err := e.admin.Get(context.Background(), e.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "/round-"+strconv.Itoa(n-1)+"/") {
			if _, err := e.admin.Delete(context.Background(), string(kv.Key)); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-victim.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a hold whose entry was deleted was not lost")
	}
	time.Sleep(1200 * time.Millisecond) // one more renewal round
	for _, m := range ms[:n-1] {
		select {
		case <-m.Done():
			t.Fatalf("hold %s lost after another hold's entry was deleted: %v", m.Key(), m.Err())
		default:
		}
	}
}
