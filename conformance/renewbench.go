package conformance

import (
	"context"
	"testing"

	"github.com/dlock-go/dlock/driver"
)

// renewBatchSize is the most holds the portable layer's watchdog hands to
// one RenewBatch call.
const renewBatchSize = 1024

// BenchRenewBatch measures a driver's RenewBatch as the watchdog calls
// it: every iteration renews all of hs, in calls of up to 1,024 holds. It
// reports ns/hold; B/op and allocs/op count all of hs, so divide them by
// len(hs) for one renewal. A renewal that fails fails b.
func BenchRenewBatch(b *testing.B, r driver.BatchRenewer, hs []driver.Hold) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for part := hs; len(part) > 0; {
			n := min(renewBatchSize, len(part))
			_, errs := r.RenewBatch(ctx, part[:n])
			for i, err := range errs {
				if err != nil {
					b.Fatalf("renewal of hold %d: %v", i, err)
				}
			}
			part = part[n:]
		}
	}
	if len(hs) > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hs)), "ns/hold")
	}
}
