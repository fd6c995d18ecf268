package redlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	redisbackend "github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/conformance"
)

// The benchmarks compare Redlock over the five masters with the
// single-Redis backend on one of those same masters, and both with the bare
// commands (no dlock), in one run:
//
//	go test -run '^$' -bench 'Conformance|SingleRedis|Commands|Bare' ./backend/redlock/
//
// Results are in the package documentation.

// BenchmarkSingleRedis runs the conformance benchmarks through
// backend/redis on the first of the five masters.
func BenchmarkSingleRedis(b *testing.B) {
	host := hostsOf(b, endpoint(b))[0]
	b.Run("one", func(b *testing.B) { conformance.RunBenchmarks(b, singleHarness(b, host)) })
}

func singleHarness(b *testing.B, host string) conformance.Harness {
	prefix := strings.TrimSuffix(testPrefix(), ":")
	return conformance.Harness{
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			c := goredis.NewClient(&goredis.Options{Addr: host, ContextTimeoutEnabled: true})
			l, err := redisbackend.New(ctx, c, redisbackend.Config{Prefix: prefix}, append(opts, dlock.WithOnClose(c.Close))...)
			if err != nil {
				_ = c.Close()
				return nil, err
			}
			return l, nil
		},
	}
}

// BenchmarkCommands counts the Redis commands one acquisition costs
// (INFO commandstats, summed over the instances involved, divided by the
// acquisitions), uncontended and contended, for both backends:
// scripts/acq counts EVALSHA and EVAL, cmds/acq every command including
// those the scripts run.
func BenchmarkCommands(b *testing.B) {
	ep := endpoint(b)
	hosts := hostsOf(b, ep)
	h := harness(b)
	single := singleHarness(b, hosts[0])
	for _, c := range []struct {
		name  string
		newL  func(context.Context, ...dlock.Option) (*dlock.Locker, error)
		hosts []string
	}{
		{"redlock-5", h.NewLocker, hosts},
		{"redis-1", single.NewLocker, hosts[:1]},
	} {
		b.Run(c.name+"/uncontended", func(b *testing.B) {
			ls := lockers(b, c.newL, 1)
			m, err := ls[0].NewMutex("bench/commands/uncontended")
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			countCommands(b, c.hosts, func() int {
				for range b.N {
					if err := m.Lock(ctx); err != nil {
						b.Fatal(err)
					}
					if err := m.Unlock(ctx); err != nil {
						b.Fatal(err)
					}
				}
				return b.N
			})
		})
		b.Run(c.name+"/contended", func(b *testing.B) {
			ls := lockers(b, c.newL, 2)
			countCommands(b, c.hosts, func() int { return contended(b, ls) })
		})
	}
}

func lockers(b *testing.B, newL func(context.Context, ...dlock.Option) (*dlock.Locker, error), n int) []*dlock.Locker {
	b.Helper()
	var ls []*dlock.Locker
	for range n {
		l, err := newL(context.Background(), dlock.WithTTL(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = l.Close() })
		ls = append(ls, l)
	}
	return ls
}

// contended has 8 goroutines over the lockers take one key b.N times in
// all, holding it 1ms each time, as the conformance benchmark does.
func contended(b *testing.B, ls []*dlock.Locker) int {
	const goroutines = 8
	ctx := context.Background()
	var (
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	for g := range goroutines {
		m, err := ls[g%len(ls)].NewMutex("bench/commands/contended")
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for left.Add(-1) >= 0 {
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return b.N
}

// countCommands runs body (which returns how many acquisitions it made)
// and reports the commands the hosts served meanwhile.
func countCommands(b *testing.B, hosts []string, body func() int) {
	admin := adminClients(b, hosts)
	before := commandStats(b, admin)
	b.ResetTimer()
	n := body()
	b.StopTimer()
	after := commandStats(b, admin)
	var cmds, scripts int64
	for name, calls := range after {
		d := calls - before[name]
		cmds += d
		if name == "evalsha" || name == "eval" {
			scripts += d
		}
	}
	b.ReportMetric(float64(cmds)/float64(n), "cmds/acq")
	b.ReportMetric(float64(scripts)/float64(n), "scripts/acq")
}

// commandStats sums INFO commandstats calls per command over the clients,
// leaving out INFO itself.
func commandStats(b testing.TB, admin []*goredis.Client) map[string]int64 {
	b.Helper()
	out := map[string]int64{}
	eachInfo(b, admin, "commandstats", func(name, rest string) {
		if !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			return
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats %s:%s: %v", name, rest, err)
		}
		out[strings.TrimPrefix(name, "cmdstat_")] += n
	})
	return out
}

// eachInfo calls f with each field of INFO section on every client.
func eachInfo(b testing.TB, admin []*goredis.Client, section string, f func(name, value string)) {
	b.Helper()
	for _, c := range admin {
		info, err := c.Info(context.Background(), section).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if name, value, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
				f(name, value)
			}
		}
	}
}

// casDel is a bare compare-and-delete.
var casDel = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// BenchmarkBare is the floor under both backends on this machine: SET NX
// PX, then a compare-and-delete, on one instance, and on five in parallel
// (one goroutine per instance, as a fan-out must).
func BenchmarkBare(b *testing.B) {
	hosts := hostsOf(b, endpoint(b))
	key := testPrefix() + "bare"
	for _, n := range []int{1, len(hosts)} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			cs := adminClients(b, hosts[:n])
			ctx := context.Background()
			each := func(op func(c *goredis.Client) error) {
				if n == 1 {
					if err := op(cs[0]); err != nil {
						b.Fatal(err)
					}
					return
				}
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := op(c); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			}
			each(func(c *goredis.Client) error { return casDel.Load(ctx, c).Err() })
			b.ResetTimer()
			for i := range b.N {
				owner := strconv.Itoa(i)
				each(func(c *goredis.Client) error { return c.SetNX(ctx, key, owner, 30*time.Second).Err() })
				each(func(c *goredis.Client) error { return casDel.EvalSha(ctx, c, []string{key}, owner).Err() })
			}
		})
	}
}

// BenchmarkRenewBatch renews 10,000 holds in the calls the watchdog makes
// (RenewBatch, 1,024 holds each): the client's cost per renewed hold, its
// allocations and the time of a round, on the five masters.
//
//	go test -run '^$' -bench RenewBatch -benchmem ./backend/redlock/
//
// srv-ns/hold is the instances' main threads' CPU per hold renewed, all
// five together: with many holds at a short lease, what the servers can
// renew in a second, not the client, sets how many holds they keep.
func BenchmarkRenewBatch(b *testing.B) {
	const n = 10000
	d := openDriver(b, endpoint(b))
	hs := acquireMany(b, d, testPrefix()+"renewbench-", n)
	admin := adminClients(b, hostsOf(b, endpoint(b)))
	cpu0 := mainThreadCPU(b, admin)
	conformance.BenchRenewBatch(b, d, hs)
	b.ReportMetric(float64(mainThreadCPU(b, admin)-cpu0)/float64(b.N*n), "srv-ns/hold")
}

// mainThreadCPU is the CPU time the instances' main threads have used, in
// nanoseconds, all together (INFO cpu).
func mainThreadCPU(b testing.TB, admin []*goredis.Client) int64 {
	b.Helper()
	var total float64
	eachInfo(b, admin, "cpu", func(name, value string) {
		if name == "used_cpu_sys_main_thread" || name == "used_cpu_user_main_thread" {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("INFO cpu %s:%s: %v", name, value, err)
			}
			total += f
		}
	})
	return int64(total * 1e9)
}
