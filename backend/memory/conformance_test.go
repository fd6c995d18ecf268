package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

func harness() conformance.Harness {
	s := memory.NewStore()
	return conformance.Harness{
		NewLocker: func(_ context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return memory.New(s, opts...)
		},
		NewDriver: func(context.Context) (driver.Locker, error) { return memory.NewDriver(s), nil },
		BreakLease: func(_ context.Context, key string) error {
			if !s.Break(key) {
				return fmt.Errorf("key %q not held", key)
			}
			return nil
		},
		URL:         "mem://conformance",
		TTL:         300 * time.Millisecond,
		CloseRounds: 300,
		InProcess:   true,
		Queue:       true,
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness()) }

func BenchmarkConformance(b *testing.B) { conformance.RunBenchmarks(b, harness()) }
