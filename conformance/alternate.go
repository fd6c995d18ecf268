package conformance

import (
	"slices"
	"testing"
	"time"
)

// BenchAlternate measures what a step costs a store: it runs base and
// with, two versions of one operation that differ by that step, in turn
// (b.N runs in all, half each), so that a load change on a shared machine
// weighs on both alike, and reports the median time of each as
// name-us/op (names[0] for base, names[1] for with) and their difference
// as diff-us/op. A run that fails fails b.
func BenchAlternate(b *testing.B, names [2]string, diff string, base, with func(b *testing.B)) {
	var times [2][]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if i%2 == 0 {
			base(b)
		} else {
			with(b)
		}
		times[i%2] = append(times[i%2], time.Since(start))
	}
	b.StopTimer()
	if len(times[1]) == 0 {
		return
	}
	var med [2]float64
	for i, t := range times {
		slices.Sort(t)
		med[i] = float64(t[len(t)/2].Nanoseconds()) / 1e3
	}
	b.ReportMetric(med[0], names[0]+"-us/op")
	b.ReportMetric(med[1], names[1]+"-us/op")
	b.ReportMetric(med[1]-med[0], diff+"-us/op")
}
