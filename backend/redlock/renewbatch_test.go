package redlock_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/driver"
)

// rtHook counts round trips: a command or a pipeline sent to one
// instance; with perCmd, commands instead, each of a pipeline on its own.
type rtHook struct {
	n      *atomic.Int64
	perCmd bool
}

func (h rtHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h rtHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h rtHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.perCmd {
			h.n.Add(int64(len(cmds)))
		} else {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func countedClients(t *testing.T) ([]*redis.Client, *atomic.Int64) {
	t.Helper()
	return hookedClients(t, false)
}

// hookedClients are clients of the instances whose round trips, or with
// perCmd commands, are counted in the returned counter.
func hookedClients(t *testing.T, perCmd bool) ([]*redis.Client, *atomic.Int64) {
	t.Helper()
	cs := adminClients(t, hostsOf(t, endpoint(t)))
	n := new(atomic.Int64)
	for _, c := range cs {
		c.AddHook(rtHook{n: n, perCmd: perCmd})
	}
	return cs, n
}

// acquireMany takes n keys named prefix+i through d, each with its own
// owner, and releases them when the test ends.
func acquireMany(t testing.TB, d *redlock.Driver, prefix string, n int) []driver.Hold {
	t.Helper()
	return acquireLeases(t, d, prefix, n, func(int) time.Duration { return 10 * time.Second })
}

// acquireLeases is acquireMany with hold i's lease lease(i).
func acquireLeases(t testing.TB, d *redlock.Driver, prefix string, n int, lease func(i int) time.Duration) []driver.Hold {
	t.Helper()
	hs := make([]driver.Hold, n)
	for i := range hs {
		h, err := d.TryAcquire(context.Background(), driver.Request{Key: prefix + strconv.Itoa(i), TTL: lease(i), Owner: "o" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	t.Cleanup(func() {
		for _, h := range hs {
			_ = d.Release(context.Background(), h)
		}
	})
	return hs
}

// Holds due together are renewed together: over two renewal rounds of
// 2,000 holds, the round trips to the five instances do not grow as one
// per hold per instance per round (the old watchdog's, since each hold's
// renewal was a fan-out of its own, and few of them overlapped), every
// lease moved forward, and the Locker costs no goroutine per hold.
func TestRenewalsArePipelined(t *testing.T) {
	const n = 2000
	cs, rts := countedClients(t)
	g0 := runtime.NumGoroutine()
	// A generous per-instance timeout: the acquires, 16 at once, are not
	// what this test measures.
	l, err := redlock.New(cs, redlock.Config{Prefix: testPrefix(), Timeout: time.Second}, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
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
				m, err := l.NewMutex("pipelined-" + strconv.Itoa(i))
				if err == nil {
					err = m.TryLock(context.Background())
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
		t.Fatal(err)
	}
	// Let the batchers' flush goroutines of the acquires end.
	time.Sleep(100 * time.Millisecond)
	if g := runtime.NumGoroutine() - g0; float64(g)/n > 0.01 {
		t.Fatalf("%d goroutines for %d holds; want at most 0.01 per hold", g, n)
	}
	first := make([]time.Time, n)
	for i, m := range ms {
		first[i] = m.Lease().Expires
	}
	r0 := rts.Load()
	time.Sleep(2*time.Second + 300*time.Millisecond)
	used := rts.Load() - r0
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
	if used > n/4 {
		t.Fatalf("%d round trips to 5 instances to renew %d holds over two rounds; want far fewer than one per hold", used, n)
	}
	t.Logf("%d round trips to 5 instances renewed %d holds over two rounds", used, n)
	for _, m := range ms {
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// The renewals of a batch cost each instance a few script calls, not one
// per hold: the renewals of a pipeline are one RenewMany. Each hold is
// still judged on its own: one taken over by another owner on every
// instance is lost, the others are renewed.
func TestRenewBatchIsFewScriptCalls(t *testing.T) {
	const n = 500
	cs, cmds := hookedClients(t, true)
	d, err := redlock.NewDriver(cs, redlock.Config{Prefix: testPrefix(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	hs := acquireMany(t, d, "few-", n)
	// Hold 7 is taken over: released everywhere, then acquired by
	// another owner, whose value the renewal must leave alone.
	if err := d.Release(ctx, hs[7]); err != nil {
		t.Fatal(err)
	}
	other, err := d.TryAcquire(ctx, driver.Request{Key: "few-7", TTL: 10 * time.Second, Owner: "other"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = d.Release(context.Background(), other) }()

	c0 := cmds.Load()
	ttls, errs := d.RenewBatch(ctx, hs)
	sent := cmds.Load() - c0
	for i := range hs {
		if i == 7 {
			if !errors.Is(errs[i], driver.ErrLockLost) {
				t.Fatalf("hold taken over: %v; want ErrLockLost", errs[i])
			}
			continue
		}
		if errs[i] != nil || ttls[i] <= 0 {
			t.Fatalf("hold %d: ttl %v err %v", i, ttls[i], errs[i])
		}
	}
	if _, err := d.Renew(ctx, other); err != nil {
		t.Fatalf("the new owner's hold after the old owner's renewal: %v", err)
	}
	// One command per hold per instance would be 5n; a RenewMany per
	// pipeline is a few per instance.
	if sent > n/10 {
		t.Fatalf("%d commands to 5 instances to renew %d holds; want a few script calls per instance", sent, n)
	}
}

// An instance that lost its scripts (SCRIPT FLUSH, a restart) answers a
// batch renewal's EVALSHA with NOSCRIPT; the batch then sends the script
// with its source, split back into keys and arguments from the command
// line it built once for every instance, and every hold is renewed.
func TestRenewBatchLoadsTheScriptAgain(t *testing.T) {
	const n = 300 // more than one chunk
	d := openDriver(t, endpoint(t))
	hs := acquireMany(t, d, testPrefix()+"noscript-", n)
	for round := range 2 { // with the source, then by SHA again
		if round == 0 {
			for _, c := range adminClients(t, hostsOf(t, endpoint(t))) {
				if err := c.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		ttls, errs := d.RenewBatch(context.Background(), hs)
		for i := range hs {
			if errs[i] != nil || ttls[i] <= 0 {
				t.Fatalf("round %d: hold %d: renewal gave ttl %v, %v; want it renewed", round, i, ttls[i], errs[i])
			}
		}
	}
}

// Holds of different leases renewed in one batch each get their own: a
// RenewMany extends all its keys to one lease, so the batch sends one per
// lease, and no hold's lease is stretched or cut to another's.
func TestRenewBatchKeepsEachLease(t *testing.T) {
	hosts := hostsOf(t, endpoint(t))
	prefix := testPrefix()
	d, err := redlock.NewDriver(adminClients(t, hosts), redlock.Config{Prefix: prefix, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	leases := []time.Duration{4 * time.Second, time.Minute, 4 * time.Second, 20 * time.Second, time.Minute}
	hs := acquireLeases(t, d, "lease-", 60, func(i int) time.Duration { return leases[i%len(leases)] })
	time.Sleep(1500 * time.Millisecond) // so that a renewal to its own lease shows
	ttls, errs := d.RenewBatch(ctx, hs)
	for i := range hs {
		if errs[i] != nil || ttls[i] <= 0 {
			t.Fatalf("hold %d: ttl %v, %v; want it renewed", i, ttls[i], errs[i])
		}
	}
	for _, c := range adminClients(t, hosts) {
		for i := range hs {
			lease := leases[i%len(leases)]
			pttl, err := c.PTTL(ctx, prefix+"l:lease-"+strconv.Itoa(i)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if pttl > lease || pttl < lease-time.Second {
				t.Fatalf("%s: hold %d of a %v lease has %v left after its renewal; want about its own lease", c.Options().Addr, i, lease, pttl)
			}
		}
	}
}
