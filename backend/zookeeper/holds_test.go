package zookeeper

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A hold costs one goroutine, for its node's watch (go-zookeeper delivers
// each watch on a channel of its own), and no more: the driver reports
// loss through a callback (driver.LossNotifier), so the portable layer no
// longer waits on each hold's Lost channel in a goroutine of its own (two
// per hold before).
func TestHoldCostsOneGoroutine(t *testing.T) {
	const n = 300
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := openLocker(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	warm, _ := l.NewMutex("holds-warm")
	if err := warm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = warm.Unlock(ctx)
	time.Sleep(100 * time.Millisecond)
	g0 := runtime.NumGoroutine()
	ms := make([]dlock.Mutex, n)
	for i := range ms {
		m, err := l.NewMutex("holds-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	time.Sleep(100 * time.Millisecond)
	if per := float64(runtime.NumGoroutine()-g0) / n; per > 1.05 {
		t.Fatalf("%.2f goroutines per hold; want one (its node's watch)", per)
	}
	for _, m := range ms {
		_ = m.Unlock(ctx)
	}
}
