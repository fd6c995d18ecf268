package etcd_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// Alternates dlock and concurrency in short rounds; reports median per-op.
func TestTmpCompare(t *testing.T) {
	if os.Getenv("TMPCMP") == "" {
		t.Skip()
	}
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := context.Background()
	m, _ := e.mustLocker(t).NewMutex("cmp-dlock")
	cli := e.client(t)
	s, _ := concurrency.NewSession(cli, concurrency.WithTTL(30))
	defer s.Close()
	cm := concurrency.NewMutex(s, e.prefix+"cmp-conc")
	var a, b []float64
	round := func(lock, unlock func(context.Context) error) float64 {
		const n = 100
		st := time.Now()
		for i := 0; i < n; i++ {
			if err := lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return float64(time.Since(st).Microseconds()) / n
	}
	for r := 0; r < 30; r++ {
		a = append(a, round(m.Lock, m.Unlock))
		b = append(b, round(cm.Lock, cm.Unlock))
	}
	sort.Float64s(a)
	sort.Float64s(b)
	t.Logf("dlock median %.0fus  concurrency median %.0fus  ratio %.2f", a[len(a)/2], b[len(b)/2], a[len(a)/2]/b[len(b)/2])
}
