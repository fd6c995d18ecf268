package consul

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A hold costs no goroutine of its own: the driver reports loss through a
// callback (driver.LossNotifier) instead of the portable layer waiting on
// each hold's Lost channel in a goroutine (one per hold before). The
// Locker has a fixed cost: up to monitors=64 blocking queries, each with
// its goroutine and HTTP connection. So the test counts what the second
// thousand holds add to the first, once every monitor is busy.
func TestHoldCostsNoGoroutine(t *testing.T) {
	const n = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, err := open(ctx, testURL(t, endpoint(t), "lockdelay=1ms"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := dlock.NewLocker(d)
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	defer l.Close()
	var ms []*dlock.Mutex
	lock := func() int {
		for range n {
			m, err := l.NewMutex("holds-" + strconv.Itoa(len(ms)))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		time.Sleep(100 * time.Millisecond)
		return runtime.NumGoroutine()
	}
	g1 := lock()
	g2 := lock()
	if per := float64(g2-g1) / n; per > 0.05 {
		t.Fatalf("%d goroutines for the second %d holds (%.3f per hold); want (almost) none", g2-g1, n, per)
	}
	for _, m := range ms {
		_ = m.Unlock(ctx)
	}
}
