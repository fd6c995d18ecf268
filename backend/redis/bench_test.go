package redis

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// bareUnlock is the textbook compare-and-delete.
var bareUnlock = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

// BenchmarkLockUnlock compares dlock's uncontended Lock+Unlock with the
// bare textbook lock (go-redis SET NX PX, then a Lua compare-and-delete)
// on the same server, in the same run. Both take two round trips; both
// draw a random owner value per acquisition. The dlock and bare
// sub-benchmarks run one after the other; paired alternates dlock, this
// driver alone (TryAcquire+Release, without the portable layer) and the
// bare lock in one loop, so that a load change on a shared machine hits
// all alike, and reports their throughput as a fraction of the bare lock's
// (ratio, driver-ratio).
func BenchmarkLockUnlock(b *testing.B) {
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			raw := withParams(b, testenv.Endpoint(b, tp.envVar), "prefix", testPrefix)
			key := "bench/" + randomHex(6)
			ctx := context.Background()
			m := openMutex(ctx, b, raw, key, dlock.WithTTL(30*time.Second))
			c := adminClient(b, raw)
			bare := bareLock{c: c, key: LockKey(testPrefix, key) + ":bare"}
			dl := func(b *testing.B) {
				if err := m.Lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := m.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("dlock", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					dl(b)
				}
			})
			// A caller's context that can end (a timeout per call, as a
			// server's handlers have) costs the portable layer a context
			// of its own per call; -benchmem shows what.
			b.Run("dlock-timeout", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					tctx, cancel := context.WithTimeout(ctx, time.Minute)
					if err := m.Lock(tctx); err != nil {
						b.Fatal(err)
					}
					if err := m.Unlock(tctx); err != nil {
						b.Fatal(err)
					}
					cancel()
				}
			})
			b.Run("bare", func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					bare.lockUnlock(ctx, b)
				}
			})
			b.Run("paired", func(b *testing.B) {
				u, _ := url.Parse(raw)
				d, err := openDriver(ctx, u, newClient)
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				drv := func(b *testing.B) {
					h, err := d.TryAcquire(ctx, driver.Request{Key: key + "/driver", TTL: 30 * time.Second, Owner: randomHex(16)})
					if err != nil {
						b.Fatal(err)
					}
					if err := d.Release(ctx, h); err != nil {
						b.Fatal(err)
					}
				}
				var td, tr, tb time.Duration
				runs := []struct {
					f   func(*testing.B)
					sum *time.Duration
				}{{dl, &td}, {drv, &tr}, {func(b *testing.B) { bare.lockUnlock(ctx, b) }, &tb}}
				for i := 0; i < b.N; i++ {
					for j := range runs {
						r := runs[(i+j)%len(runs)] // rotate, so no one always follows another
						t0 := time.Now()
						r.f(b)
						*r.sum += time.Since(t0)
					}
				}
				us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
				b.ReportMetric(us(td), "dlock-us/op")
				b.ReportMetric(us(tr), "driver-us/op")
				b.ReportMetric(us(tb), "bare-us/op")
				b.ReportMetric(float64(tb)/float64(td), "ratio")
				b.ReportMetric(float64(tb)/float64(tr), "driver-ratio")
			})
		})
	}
}

// bareLock is the textbook single-instance lock.
type bareLock struct {
	c   goredis.UniversalClient
	key string
}

func (l bareLock) lockUnlock(ctx context.Context, b *testing.B) {
	owner := randomHex(16)
	ok, err := l.c.SetNX(ctx, l.key, owner, 30*time.Second).Result()
	if err != nil || !ok {
		b.Fatalf("SET NX: %v %v", ok, err)
	}
	if n, err := bareUnlock.Run(ctx, l.c, []string{l.key}, owner).Int(); err != nil || n != 1 {
		b.Fatalf("unlock: %v %v", n, err)
	}
}

// BenchmarkContended: waiters goroutines spread over lockers Lockers take
// one key in turn, each holding it about 1ms. It reports the handoff
// latency (from the holder starting Unlock to the next Lock returning) and
// the Redis commands per acquisition from INFO commandstats: cmds/acq
// counts every command including those a script calls, evals/acq the
// scripts run, subs/acq the (un)subscribe commands. It runs on a
// redis-server of its own, so that no other client's commands are counted.
func BenchmarkContended(b *testing.B) {
	srv := startTempServer(b)
	stats := srv.client()
	for _, c := range []struct{ waiters, lockers int }{
		{2, 2}, {8, 2}, {32, 2}, // waiters in two processes
		{8, 8}, {32, 32}, // every waiter in a process of its own
	} {
		b.Run(fmt.Sprintf("waiters=%d/lockers=%d", c.waiters, c.lockers), func(b *testing.B) {
			benchContended(b, srv.url(), stats, c.waiters, c.lockers)
		})
	}
}

func benchContended(b *testing.B, raw string, stats *goredis.Client, waiters, lockers int) {
	ctx := context.Background()
	key := "contended/" + randomHex(6)
	ms := make([]*dlock.Mutex, waiters)
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		l, err := openLocker(ctx, raw, dlock.WithTTL(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		ls[i] = l
	}
	for i := range ms {
		m, err := ls[i%lockers].NewMutex(key)
		if err != nil {
			b.Fatal(err)
		}
		ms[i] = m
	}
	before := commandStats(b, stats)
	cs := make([]conformance.Contender, len(ms))
	for i, m := range ms {
		cs[i] = conformance.Contender{Lock: m.Lock, Unlock: m.Unlock}
	}
	conformance.Contend(b, time.Millisecond, cs)
	after := commandStats(b, stats)
	n := float64(b.N)
	var all, evals, subs int64
	for cmd, calls := range after {
		d := calls - before[cmd]
		switch {
		case cmd == "info":
			continue // ours, reading these stats
		case cmd == "evalsha" || cmd == "eval":
			evals += d
		case strings.HasSuffix(cmd, "subscribe"):
			subs += d
		}
		all += d
	}
	b.ReportMetric(float64(all)/n, "cmds/acq")
	b.ReportMetric(float64(evals)/n, "evals/acq")
	b.ReportMetric(float64(subs)/n, "subs/acq")
}

// commandStats reads the calls of every command from INFO commandstats.
func commandStats(b testing.TB, c *goredis.Client) map[string]int64 {
	b.Helper()
	s, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for name, v := range parseInfo(s) {
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		out[cmd], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}
