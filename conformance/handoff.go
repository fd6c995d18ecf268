package conformance

import (
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Handoffs measures handoff latency in a contended benchmark: the time from
// a holder starting to unlock to the next holder's Lock returning. Every
// contender calls Acquired right after its Lock returns and Releasing right
// before its Unlock; Report adds the percentiles to the benchmark. The zero
// value is ready to use and safe for concurrent use.
type Handoffs struct {
	last atomic.Int64 // UnixNano when the last holder began to unlock
	mu   sync.Mutex
	d    []time.Duration
}

// Acquired records one handoff, if a holder released before.
func (h *Handoffs) Acquired() {
	if rel := h.last.Load(); rel != 0 {
		d := time.Since(time.Unix(0, rel))
		h.mu.Lock()
		h.d = append(h.d, d)
		h.mu.Unlock()
	}
}

// Releasing marks the moment a holder starts to unlock.
func (h *Handoffs) Releasing() { h.last.Store(time.Now().UnixNano()) }

// Report adds handoff-p50-ms, handoff-p99-ms and handoff-max-ms to b.
func (h *Handoffs) Report(b *testing.B) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.d) == 0 {
		return
	}
	sort.Slice(h.d, func(i, j int) bool { return h.d[i] < h.d[j] })
	q := func(p float64) float64 {
		return float64(h.d[int(p*float64(len(h.d)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "handoff-p50-ms")
	b.ReportMetric(q(0.99), "handoff-p99-ms")
	b.ReportMetric(q(1), "handoff-max-ms")
}
