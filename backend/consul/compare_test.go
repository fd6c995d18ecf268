package consul

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
)

// The benchmarks below compare dlock with the Consul client's own api.Lock,
// in one run against the same agent (see the package documentation for the
// command and the figures). Both use a 15s session TTL, api.Lock's default.

const benchTTL = 15 * time.Second

func benchRun() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// benchLocker opens a dlock Locker on the test agent.
func benchLocker(b *testing.B, raw string) *dlock.Locker {
	b.Helper()
	d, err := open(context.Background(), testURL(b, raw, "lockdelay=1ms"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := dlock.NewLocker(d, dlock.WithTTL(benchTTL))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

func apiLock(b *testing.B, c *api.Client, key string) *api.Lock {
	b.Helper()
	l, err := c.LockOpts(&api.LockOptions{Key: key, SessionTTL: benchTTL.String()})
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// locker is one contender: lock blocks until held.
type contender struct {
	lock   func() error
	unlock func() error
}

func dlockContender(m *dlock.Mutex) contender {
	ctx := context.Background()
	return contender{lock: func() error { return m.Lock(ctx) }, unlock: func() error { return m.Unlock(ctx) }}
}

func apiContender(l *api.Lock) contender {
	return contender{
		lock: func() error {
			_, err := l.Lock(nil)
			return err
		},
		unlock: l.Unlock,
	}
}

func BenchmarkVsAPILock(b *testing.B) {
	raw := endpoint(b)
	run := benchRun()
	key := func(name string) string { return testPrefix + "/bench/" + run + "/" + name }

	b.Run("Uncontended/dlock", func(b *testing.B) {
		l := benchLocker(b, raw)
		m, err := l.NewMutex("bench/" + run + "/uncontended")
		if err != nil {
			b.Fatal(err)
		}
		c := dlockContender(m)
		benchUncontended(b, c)
	})
	b.Run("Uncontended/api.Lock", func(b *testing.B) {
		benchUncontended(b, apiContender(apiLock(b, newClient(b, raw), key("apilock-uncontended"))))
	})
	// Eight contenders, each with its own Locker (own connections and
	// sessions), as eight processes would be.
	b.Run("Contended/dlock-8-lockers", func(b *testing.B) {
		cs := make([]contender, 8)
		for i := range cs {
			m, err := benchLocker(b, raw).NewMutex("bench/" + run + "/contended8")
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = dlockContender(m)
		}
		benchContended(b, cs)
	})
	// Eight goroutines over two Lockers: within a Locker waiters queue in
	// process, as in conformance.RunBenchmarks.
	b.Run("Contended/dlock-2-lockers", func(b *testing.B) {
		ls := []*dlock.Locker{benchLocker(b, raw), benchLocker(b, raw)}
		cs := make([]contender, 8)
		for i := range cs {
			m, err := ls[i%2].NewMutex("bench/" + run + "/contended2")
			if err != nil {
				b.Fatal(err)
			}
			cs[i] = dlockContender(m)
		}
		benchContended(b, cs)
	})
	b.Run("Contended/api.Lock", func(b *testing.B) {
		cs := make([]contender, 8)
		for i := range cs {
			cs[i] = apiContender(apiLock(b, newClient(b, raw), key("apilock-contended")))
		}
		benchContended(b, cs)
	})
}

func benchUncontended(b *testing.B, c contender) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.lock(); err != nil {
			b.Fatal(err)
		}
		if err := c.unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// benchContended runs b.N acquisitions shared by the contenders, each
// holding about 1ms. It reports handoff latency (from the holder starting
// to unlock to the next holder's lock returning) and fairness: the most and
// fewest acquisitions any contender got, and their ratio.
func benchContended(b *testing.B, cs []contender) {
	ccs := make([]conformance.Contender, len(cs))
	for i, c := range cs {
		ccs[i] = conformance.Contender{
			Lock:   func(context.Context) error { return c.lock() },
			Unlock: func(context.Context) error { return c.unlock() },
		}
	}
	counts := conformance.Contend(b, time.Millisecond, ccs)
	lo, hi := counts[0], counts[0]
	for _, n := range counts {
		lo, hi = min(lo, n), max(hi, n)
	}
	ratio := math.Inf(1)
	if lo > 0 {
		ratio = float64(hi) / float64(lo)
	}
	b.ReportMetric(float64(lo), "min-acq")
	b.ReportMetric(float64(hi), "max-acq")
	b.ReportMetric(ratio, "max/min")
}
