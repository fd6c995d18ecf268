package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
	"github.com/dlock-go/dlock/conformance"
)

// waitQueue waits until key's queue has n entries.
func (e *env) waitQueue(t *testing.T, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.queueLen(ctxFor(t, 5*time.Second), key)
		if err != nil {
			t.Fatalf("queueLen: %v", err)
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q has %d entries; want %d", key, got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lockAsync starts m.Lock(ctx) and returns where its result arrives.
func lockAsync(ctx context.Context, m *dlock.Mutex) <-chan error {
	c := make(chan error, 1)
	go func() { c <- m.Lock(ctx) }()
	return c
}

// Waiters from different Lockers are served in the order they queued.
func TestFIFO(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, time.Minute)
	const key, n = "fifo", 4
	holder, _ := e.mustLocker(t).NewMutex(key)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	order := make(chan int, n)
	ms := make([]*dlock.Mutex, n)
	for i := range ms {
		ms[i], _ = e.mustLocker(t).NewMutex(key)
		go func() {
			if err := ms[i].Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				order <- -1
				return
			}
			order <- i
			_ = ms[i].Unlock(ctx)
		}()
		e.waitQueue(t, key, int64(i+2))
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	for want := 0; want < n; want++ {
		if got := <-order; got != want {
			t.Fatalf("waiter %d got the lock in place %d", got, want)
		}
	}
}

// A failed TryLock writes nothing; a waiter whose context ends removes its
// entry; a waiter behind one that left follows the new predecessor.
func TestQueueCleanup(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, time.Minute)
	const key = "cleanup"
	holder, _ := e.mustLocker(t).NewMutex(key)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	try, _ := e.mustLocker(t).NewMutex(key)
	if err := try.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock on a held key: %v; want ErrNotAcquired", err)
	}
	e.waitQueue(t, key, 1)

	// Waiter A queues behind the holder, B behind A; A gives up.
	actx, acancel := context.WithCancel(ctx)
	a, _ := e.mustLocker(t).NewMutex(key)
	aErr := lockAsync(actx, a)
	e.waitQueue(t, key, 2)
	b, _ := e.mustLocker(t).NewMutex(key)
	bErr := lockAsync(ctx, b)
	e.waitQueue(t, key, 3)
	acancel()
	if err := <-aErr; !errors.Is(err, context.Canceled) || !errors.Is(err, dlock.ErrNotAcquired) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("cancelled waiter: %v; want context.Canceled and ErrNotAcquired, not ErrUnavailable", err)
	}
	e.waitQueue(t, key, 2) // A's entry is gone
	select {
	case err := <-bErr:
		t.Fatalf("B returned while the holder still holds: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-bErr; err != nil {
		t.Fatalf("B after the holder left: %v", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	e.waitQueue(t, key, 0)
}

// A waiter is kept alive while it waits longer than its TTL, and one whose
// lease is revoked while queued stops with ErrLockLost instead of waiting
// forever (etcd issue 19597).
func TestWaiterLease(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, time.Minute)
	const key = "waiter-lease"
	holder, _ := e.mustLocker(t).NewMutex(key)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	patient, _ := e.mustLocker(t).NewMutex(key, dlock.WithTTL(etcd.MinTTL))
	pErr := lockAsync(ctx, patient)
	e.waitQueue(t, key, 2)
	doomed, _ := e.mustLocker(t).NewMutex(key, dlock.WithTTL(etcd.MinTTL))
	dErr := lockAsync(ctx, doomed)
	e.waitQueue(t, key, 3)

	time.Sleep(3 * etcd.MinTTL) // well past the waiters' TTL
	resp, err := e.admin.Get(ctx, etcd.QueuePrefix(e.prefix, key), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil || len(resp.Kvs) != 3 {
		t.Fatalf("queue after 3*TTL: %v %v; want 3 entries (waiters kept alive)", resp, err)
	}
	if _, err := e.admin.Revoke(ctx, clientv3.LeaseID(resp.Kvs[2].Lease)); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	select {
	case err := <-dErr:
		if !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("waiter whose lease was revoked: %v; want ErrLockLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter whose lease was revoked still waits")
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-pErr; err != nil {
		t.Fatalf("patient waiter: %v", err)
	}
	if !patient.Lease().Valid() {
		t.Fatal("patient waiter's lease is not valid once granted")
	}
	_ = patient.Unlock(ctx)
}

// A waiter whose lease expired because no keepalive got through (its
// client was cut off from the server for longer than its TTL) lost only its
// place in line: it queues again once it hears of it, and is granted the
// lock when the holder releases it. Before, its Lock failed with
// ErrLockLost, as for a lease someone revoked (TestWaiterLease), though it
// never held the lock; on a loaded three-member cluster that ended most of
// 2,000 waiting Locks with a lease per hold.
func TestWaiterWhoseLeaseRanOutQueuesAgain(t *testing.T) {
	for _, perHold := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease_per_hold=%v", perHold), func(t *testing.T) {
			e := newEnv(t, "DLOCK_ETCD_URL")
			ctx := ctxFor(t, time.Minute)
			key := fmt.Sprintf("waiter-ran-out-%v", perHold)
			holder, _ := e.mustLocker(t).NewMutex(key)
			if err := holder.Lock(ctx); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			g := newReplyGate(t, e.cfg.Endpoints[0])
			cfg := e.cfg
			cfg.Endpoints = []string{g.ln.Addr().String()}
			cli, err := clientv3.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cli.Close() })
			l, err := etcdNew(cli, etcd.Config{Prefix: e.prefix, LeasePerHold: perHold})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			waiter, _ := l.NewMutex(key, dlock.WithTTL(etcd.MinTTL))
			wErr := lockAsync(ctx, waiter)
			e.waitQueue(t, key, 2)
			first, err := e.admin.Get(ctx, etcd.QueuePrefix(e.prefix, key), clientv3.WithLastCreate()...)
			if err != nil || len(first.Kvs) != 1 {
				t.Fatalf("the waiter's entry: %v %v", first, err)
			}

			g.sever()
			e.waitQueue(t, key, 1) // the server expired the waiter's lease
			g.open()
			// The waiter hears of it and queues again, with a new entry.
			deadline := time.Now().Add(20 * time.Second)
			for {
				select {
				case err := <-wErr:
					t.Fatalf("the waiter's Lock returned %v while the lock was held; want it to queue again", err)
				default:
				}
				resp, err := e.admin.Get(ctx, etcd.QueuePrefix(e.prefix, key), clientv3.WithLastCreate()...)
				if err != nil {
					t.Fatal(err)
				}
				if len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision > first.Kvs[0].CreateRevision &&
					resp.Kvs[0].Lease != first.Kvs[0].Lease {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the waiter did not queue again within 20s of hearing from the server")
				}
				time.Sleep(50 * time.Millisecond)
			}
			held := holder.Token()
			if err := holder.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if err := <-wErr; err != nil {
				t.Fatalf("the waiter's Lock: %v; want the lock", err)
			}
			if tok := waiter.Token(); tok <= held {
				t.Fatalf("the waiter's token %d is not above the holder's %d", tok, held)
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatalf("the waiter's Unlock: %v", err)
			}
		})
	}
}

// Odd keys map to distinct queues that are not prefixes of one another.
func TestEscape(t *testing.T) {
	keys := []string{"a", "a/b", "a%2Fb", "a%2fb", "a/", "/a", ".", "..", "\x00nul", "é", "a b", "a+b", "%", "%25"}
	seen := map[string]string{}
	for _, k := range keys {
		q := etcd.QueuePrefix("p", k)
		if prev, dup := seen[q]; dup {
			t.Fatalf("keys %q and %q share the queue %q", prev, k, q)
		}
		seen[q] = k
	}
	for qa, a := range seen {
		for qb, b := range seen {
			if a != b && len(qb) > len(qa) && qb[:len(qa)] == qa {
				t.Fatalf("queue of %q (%q) is a prefix of the queue of %q (%q)", a, qa, b, qb)
			}
		}
	}
	if got := etcd.Escape("a/b c%"); got != "a%2Fb%20c%25" {
		t.Fatalf("Escape = %q", got)
	}
}

// Waiters that give up at random points while others queue behind them:
// exclusion holds, tokens rise, and the queue ends empty.
func TestQueueChurn(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			e := newEnv(t, tp.envVar)
			const (
				key     = "churn"
				workers = 6
				rounds  = 15
			)
			ctx := ctxFor(t, 2*time.Minute)
			var (
				inside, overlaps, taken atomic.Int32
				mu                      sync.Mutex
				last                    dlock.Token
				wg                      sync.WaitGroup
			)
			for w := 0; w < workers; w++ {
				m, _ := e.mustLocker(t).NewMutex(key)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for r := 0; r < rounds; r++ {
						// Every third attempt gives up after a few ms.
						lctx, cancel := ctx, context.CancelFunc(func() {})
						if (w+r)%3 == 0 {
							lctx, cancel = context.WithTimeout(ctx, time.Duration(1+r%5)*time.Millisecond)
						}
						err := m.Lock(lctx)
						cancel()
						if err != nil {
							if !errors.Is(err, context.DeadlineExceeded) {
								t.Errorf("Lock: %v", err)
								return
							}
							continue
						}
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						mu.Lock()
						if m.Token() <= last {
							t.Errorf("token %d after %d", m.Token(), last)
						}
						last = m.Token()
						mu.Unlock()
						taken.Add(1)
						time.Sleep(time.Millisecond)
						inside.Add(-1)
						if err := m.Unlock(ctx); err != nil {
							t.Errorf("Unlock: %v", err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if n := overlaps.Load(); n != 0 {
				t.Fatalf("%d overlapping holds", n)
			}
			t.Logf("%d holds", taken.Load())
			e.waitQueue(t, key, 0)
		})
	}
}

// Close ends Lock calls in flight: a waiter queued behind a holder (whose
// entry is removed), and a Lock stuck on a server that never answers.
func TestCloseEndsWaiters(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := ctxFor(t, time.Minute)
	const key = "close-waiter"
	holder, _ := e.mustLocker(t).NewMutex(key)
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	wl := e.mustLocker(t)
	w, _ := wl.NewMutex(key)
	wErr := lockAsync(context.Background(), w)
	e.waitQueue(t, key, 2)

	cfg := e.cfg
	cfg.Endpoints = []string{conformance.SilentServer(t)}
	cfg.DialTimeout = 0
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("client of a silent server: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	sl, err := etcd.New(cli, etcd.Config{Prefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := sl.NewMutex(key)
	sErr := lockAsync(context.Background(), s)
	time.Sleep(200 * time.Millisecond)

	for name, c := range map[string]struct {
		l    *dlock.Locker
		errc <-chan error
	}{"queued waiter": {wl, wErr}, "silent server": {sl, sErr}} {
		start := time.Now()
		if err := c.l.Close(); err != nil {
			t.Errorf("%s: Close: %v", name, err)
		}
		select {
		case err := <-c.errc:
			if !errors.Is(err, dlock.ErrClosed) {
				t.Errorf("%s: Lock after Close: %v; want ErrClosed", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Lock still blocked 10s after Close", name)
		}
		t.Logf("%s: Close took %v", name, time.Since(start))
	}
	e.waitQueue(t, key, 1) // the queued waiter's entry is gone
	if err := holder.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
