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

func BenchmarkConformance(b *testing.B) {
	for _, tp := range topologies {
		b.Run(tp.name, func(b *testing.B) {
			conformance.RunBenchmarks(b, newEnv(b, tp.envVar).harness())
		})
	}
}
