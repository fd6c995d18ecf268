package etcd_test

import (
	"testing"

	"github.com/dlock-go/dlock/conformance"
)

func TestConformance(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			conformance.Run(t, newEnv(t, tp.envVar).harness())
		})
	}
}

// The same suite with a lease per hold (Config.LeasePerHold), the
// driver's other lease mode.
func TestConformanceLeasePerHold(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			e := newEnv(t, tp.envVar)
			e.perHold = true
			conformance.Run(t, e.harness())
		})
	}
}

func BenchmarkConformance(b *testing.B) {
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			conformance.RunBenchmarks(b, newEnv(b, tp.envVar).harness())
		})
	}
}
