package lockctl

import (
	"context"
	"fmt"
	"github.com/dlock-go/dlock/observe"
	"io"
	"slices"
	"sort"
	"sync"
	"text/tabwriter"
	"time"
)

// metrics is the --metrics summary: an Observer that keeps, per backend,
// the figures of dlock's OpenTelemetry instruments (package dlockotel
// names them alike), and prints them when lockctl exits.
type metrics struct {
	mu  sync.Mutex
	per map[string]*backendMetrics // by backend (URL scheme)
}

type backendMetrics struct {
	durations map[string][]time.Duration // instrument{attribute} -> samples
	counts    map[string]int64
}

func newMetrics() *metrics { return &metrics{per: map[string]*backendMetrics{}} }

var _ observe.Observer = (*metrics)(nil)

func (x *metrics) of(backend string) *backendMetrics {
	b := x.per[backend]
	if b == nil {
		b = &backendMetrics{durations: map[string][]time.Duration{}, counts: map[string]int64{}}
		x.per[backend] = b
	}
	return b
}

func (x *metrics) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }

func (x *metrics) Step(context.Context, observe.Call, observe.Step) {}

func (x *metrics) End(_ context.Context, c observe.Call, r observe.Result) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.of(c.Backend)
	switch c.Op {
	case observe.OpLock, observe.OpTryLock:
		k := fmt.Sprintf("dlock.lock.wait.duration{op=%s,outcome=%s}", c.Op, r.Outcome)
		b.durations[k] = append(b.durations[k], r.Duration)
		if r.Outcome == observe.OutcomeAcquired {
			b.counts["dlock.lock.acquisitions"]++
		}
	case observe.OpRenew:
		b.counts[fmt.Sprintf("dlock.lock.renewals{outcome=%s}", r.Outcome)]++
		b.durations["dlock.lock.renewal.duration"] = append(b.durations["dlock.lock.renewal.duration"], r.Duration)
		if r.Outcome == observe.OutcomeRenewed {
			b.durations["dlock.lock.renewal.margin"] = append(b.durations["dlock.lock.renewal.margin"], r.Margin)
		}
	}
}

func (x *metrics) HoldEnd(e observe.HoldEnd) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.of(e.Backend)
	end := "unlocked"
	if e.Lost {
		end = "lost"
		b.counts[fmt.Sprintf("dlock.lock.losses{cause=%s}", observe.LossCause(e.Cause))]++
	}
	k := "dlock.lock.hold.duration{end=" + end + "}"
	b.durations[k] = append(b.durations[k], e.Held)
}

// print writes the summary: one row per instrument and attribute set.
func (x *metrics) print(w io.Writer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	backends := make([]string, 0, len(x.per))
	for b := range x.per {
		backends = append(backends, b)
	}
	sort.Strings(backends)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tINSTRUMENT\tCOUNT\tMIN\tP50\tP99\tMAX")
	for _, name := range backends {
		b := x.per[name]
		keys := make([]string, 0, len(b.durations)+len(b.counts))
		for k := range b.durations {
			keys = append(keys, k)
		}
		for k := range b.counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := b.durations[k]; ok {
				s = slices.Clone(s)
				slices.Sort(s)
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", name, k, len(s),
					fmtDur(s[0]), fmtDur(s[len(s)/2]), fmtDur(s[min(len(s)-1, len(s)*99/100)]), fmtDur(s[len(s)-1]))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t\t\t\t\n", name, k, b.counts[k])
		}
	}
	tw.Flush()
}

func fmtDur(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
