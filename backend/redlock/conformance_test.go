package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

// harness runs the suite on the five-master topology. Every Locker has its
// own connections; the prefix keeps this run's keys apart from others'.
func harness(t testing.TB) conformance.Harness {
	ep := endpoint(t)
	hosts := hostsOf(t, ep)
	prefix := testPrefix()
	admin := adminClients(t, hosts)
	rawURL := withParams(t, ep, "prefix", prefix, "timeout", "2s")
	return conformance.Harness{
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			d, err := redlock.OpenDriver(ctx, rawURL)
			if err != nil {
				return nil, err
			}
			l, err := dlock.NewLocker(d, opts...)
			if err != nil {
				_ = d.Close()
			}
			return l, err
		},
		NewDriver: func(ctx context.Context) (driver.Locker, error) {
			return redlock.OpenDriver(ctx, rawURL)
		},
		// A hanging server plus two more: no instance answers.
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			u := fmt.Sprintf("redlock://%s,%s,%s?prefix=%s&timeout=200ms",
				addr, conformance.SilentServer(t), conformance.SilentServer(t), prefix)
			d, err := redlock.OpenDriver(ctx, u)
			if err != nil {
				return nil, err
			}
			return dlock.NewLocker(d)
		},
		// The same over clients of the caller's: New does not talk to them.
		UnreachableClient: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			var clients []*redis.Client
			for _, a := range []string{addr, conformance.SilentServer(t), conformance.SilentServer(t)} {
				c := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
				t.Cleanup(func() { _ = c.Close() })
				clients = append(clients, c)
			}
			return redlock.New(clients, redlock.Config{Prefix: prefix, Timeout: 200 * time.Millisecond})
		},
		// An operator deleting the lock on every instance.
		BreakLease: func(ctx context.Context, key string) error {
			deleted := int64(0)
			for _, c := range admin {
				n, err := c.Del(ctx, prefix+"l:"+key).Result()
				if err != nil {
					return err
				}
				deleted += n
			}
			if deleted == 0 {
				return errors.New("the lock was on no instance")
			}
			return nil
		},
		URL:    rawURL,
		CutOff: conformance.CutOffURL(rawURL),
		TTL:    3 * time.Second,
		// The wake queues: Inspect counts the waiters in line.
		Queue: true,
	}
}

func TestConformance(t *testing.T) {
	t.Run("five", func(t *testing.T) { conformance.Run(t, harness(t)) })
}

func BenchmarkConformance(b *testing.B) {
	b.Run("five", func(b *testing.B) { conformance.RunBenchmarks(b, harness(b)) })
}
