package redis

import (
	"context"
	"errors"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// rtHook counts client round trips: a command, or a pipeline, sent to one
// server connection.
type rtHook struct{ n *atomic.Int64 }

func (h rtHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h rtHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h rtHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// countedClient is a client on raw whose round trips are counted per
// node (on a Cluster, the hook is added to every node's client).
func countedClient(t *testing.T, raw string) (goredis.UniversalClient, *atomic.Int64) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, err := parseOwnParams(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newClient(rest)
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	switch c := c.(type) {
	case *goredis.ClusterClient:
		c.OnNewNode(func(node *goredis.Client) { node.AddHook(rtHook{n}) })
	case *goredis.Client:
		c.AddHook(rtHook{n})
	}
	return c, n
}

// holdKeys locks n keys through l, 16 at a time.
func holdKeys(t *testing.T, l *dlock.Locker, n int, prefix string) []*dlock.Mutex {
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
		t.Fatalf("locking %d keys: %v", n, err)
	}
	return ms
}

// Holds that fall due together are renewed in one pipeline: over a
// window of at least two renewal rounds of 2,000 holds, the client's
// round trips do not grow as one per hold per round (the old watchdog
// made exactly one per hold per round), and every lease moved forward.
// The Locker costs no goroutine per hold.
func TestRenewalsArePipelined(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		const n = 2000
		raw := withParams(t, endpoint, "prefix", testPrefix)
		c, rts := countedClient(t, raw)
		ctx := context.Background()
		g0 := runtime.NumGoroutine()
		const ttl = 3 * time.Second
		l, err := New(ctx, c, Config{Prefix: testPrefix}, dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close(); _ = c.Close() })
		ms := holdKeys(t, l, n, "pipelined-"+strconv.FormatInt(time.Now().UnixNano(), 36)+"-")
		if g := runtime.NumGoroutine() - g0; float64(g)/n > 0.01 {
			t.Fatalf("%d goroutines for %d holds; want at most 0.01 per hold", g, n)
		}
		first := make([]time.Time, n)
		for i, m := range ms {
			first[i] = m.Lease().Expires
		}
		r0 := rts.Load()
		// Two renewal intervals and a bit: every hold is renewed at least
		// once, most twice.
		time.Sleep(2*driver.RenewInterval(ttl) + 300*time.Millisecond)
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
		if used > n/10 {
			t.Fatalf("%d round trips to renew %d holds over two renewal rounds; want far fewer than one per hold", used, n)
		}
		t.Logf("%d round trips renewed %d holds over two renewal rounds", used, n)
		for _, m := range ms {
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A batch is one pipeline per node, however many holds, and renews every
// one of them. (That each answer is its own hold's is the conformance
// suite's DriverRenewBatch.)
func TestRenewBatchIsOnePipelinePerNode(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		raw := withParams(t, endpoint, "prefix", testPrefix)
		c, rts := countedClient(t, raw)
		ctx := context.Background()
		d, admin := testDriver(t, c, raw)
		const n = 500
		base := "batch-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
		hs := acquireShortened(t, d, admin, base, n, func(int) time.Duration { return 10 * time.Second })
		nodes := 1
		if cc, ok := c.(*goredis.ClusterClient); ok {
			var masters atomic.Int64
			_ = cc.ForEachMaster(ctx, func(context.Context, *goredis.Client) error { masters.Add(1); return nil })
			nodes = int(masters.Load())
		}
		r0 := rts.Load()
		ttls, errs := d.RenewBatch(ctx, hs)
		used := rts.Load() - r0
		if len(ttls) != n || len(errs) != n {
			t.Fatalf("RenewBatch answered %d TTLs and %d errors for %d holds", len(ttls), len(errs), n)
		}
		for i := range hs {
			if errs[i] != nil || ttls[i] != 10*time.Second {
				t.Fatalf("hold %d: ttl %v, err %v; want 10s, nil", i, ttls[i], errs[i])
			}
		}
		for i := range n {
			if p := admin.PTTL(ctx, LockKey(testPrefix, base+strconv.Itoa(i))).Val(); p <= time.Second {
				t.Fatalf("hold %d: PTTL %v after RenewBatch; want it renewed to 10s", i, p)
			}
		}
		// One pipeline per node, and a full-script resend after NOSCRIPT.
		if max := int64(2*nodes + 2); used > max {
			t.Fatalf("RenewBatch of %d holds took %d round trips on %d node(s); want at most %d", n, used, nodes, max)
		}
		t.Logf("RenewBatch of %d holds: %d round trips on %d node(s)", n, used, nodes)
	})
}

// scriptHook counts the script calls (EVALSHA and EVAL) a client sends,
// alone or in pipelines.
type scriptHook struct{ n *atomic.Int64 }

func (h scriptHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h scriptHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h scriptHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		for _, c := range cmds {
			h.count(c)
		}
		return next(ctx, cmds)
	}
}

func (h scriptHook) count(c goredis.Cmder) {
	if n := c.Name(); n == "evalsha" || n == "eval" {
		h.n.Add(1)
	}
}

// On one server (standalone, or failover through Sentinel), a batch renews
// many holds per script call: the holds of one lease in calls of up to
// renewManyKeys, and holds of different leases in calls of their own. Each
// hold still gets its own answer: one taken over in the meantime is
// reported not held, and left as it is. On a Cluster, whose locks are in
// different slots, each hold has a script call of its own.
func TestRenewBatchSharesScriptCalls(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		raw := withParams(t, endpoint, "prefix", testPrefix)
		c, _ := countedClient(t, raw)
		calls := new(atomic.Int64)
		cluster := false
		switch c := c.(type) {
		case *goredis.ClusterClient:
			cluster = true
			c.OnNewNode(func(node *goredis.Client) { node.AddHook(scriptHook{calls}) })
		case *goredis.Client:
			c.AddHook(scriptHook{calls})
		}
		ctx := context.Background()
		d, admin := testDriver(t, c, raw)
		const n, short = 600, 20 // holds, of which the first short at a 5s lease
		base := "sharedcalls-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
		ttl := func(i int) time.Duration {
			if i < short {
				return 5 * time.Second
			}
			return 10 * time.Second
		}
		hs := acquireShortened(t, d, admin, base, n, ttl)
		// Hold 7 (a short one) and hold 300 are taken over by someone else.
		taken := map[int]bool{7: true, 300: true}
		for i := range taken {
			if err := admin.Set(ctx, LockKey(testPrefix, base+strconv.Itoa(i)), "someone else", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c0 := calls.Load()
		ttls, errs := d.RenewBatch(ctx, hs)
		used := calls.Load() - c0
		for i := range hs {
			if taken[i] {
				if !errors.Is(errs[i], driver.ErrNotHeld) {
					t.Fatalf("hold %d, taken over: ttl %v, err %v; want ErrNotHeld", i, ttls[i], errs[i])
				}
				if v := admin.Get(ctx, LockKey(testPrefix, base+strconv.Itoa(i))).Val(); v != "someone else" {
					t.Fatalf("hold %d, taken over: the lock is now %q", i, v)
				}
				continue
			}
			if errs[i] != nil || ttls[i] != ttl(i) {
				t.Fatalf("hold %d: ttl %v, err %v; want %v, nil", i, ttls[i], errs[i], ttl(i))
			}
			if p := admin.PTTL(ctx, LockKey(testPrefix, base+strconv.Itoa(i))).Val(); p <= time.Second {
				t.Fatalf("hold %d: PTTL %v after RenewBatch; want it renewed to %v", i, p, ttl(i))
			}
		}
		// One call for the 20 short leases, ceil(580/128) = 5 for the
		// others; the same again if the server answered NOSCRIPT.
		want := int64(1 + (n-short+renewManyKeys-1)/renewManyKeys)
		if cluster {
			want = n
		}
		if used != want && used != 2*want {
			t.Fatalf("RenewBatch of %d holds made %d script calls; want %d", n, used, want)
		}
		t.Logf("RenewBatch of %d holds: %d script calls", n, used)
	})
}

// acquireShortened takes the n keys base0, base1, ... through d, key i with
// the lease ttl(i) and the owner "owner<i>", releases them when the test
// ends, and shortens every lease to a second, so that a renewal shows.
func acquireShortened(t *testing.T, d *redisDriver, admin goredis.UniversalClient, base string, n int, ttl func(int) time.Duration) []driver.Hold {
	t.Helper()
	ctx := context.Background()
	hs := make([]driver.Hold, n)
	for i := range hs {
		h, err := d.TryAcquire(ctx, driver.Request{Key: base + strconv.Itoa(i), TTL: ttl(i), Owner: "owner" + strconv.Itoa(i)})
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
	for i := range n {
		if err := admin.PExpire(ctx, LockKey(testPrefix, base+strconv.Itoa(i)), time.Second).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return hs
}

// testDriver is a driver on c, closed when the test ends, and an admin
// client of its server (raw).
func testDriver(t *testing.T, c goredis.UniversalClient, raw string) (*redisDriver, goredis.UniversalClient) {
	t.Helper()
	d, err := newDriver(context.Background(), c, Config{Prefix: testPrefix}, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, adminClient(t, raw)
}
