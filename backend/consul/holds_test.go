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
// each hold's Lost channel in a goroutine (one per hold before).
func TestHoldCostsNoGoroutine(t *testing.T) {
	const n = 2000
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
	if per := float64(runtime.NumGoroutine()-g0) / n; per > 0.1 {
		t.Fatalf("%.2f goroutines per hold; want (almost) none", per)
	}
	for _, m := range ms {
		_ = m.Unlock(ctx)
	}
}
