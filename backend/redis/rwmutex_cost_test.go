package redis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// The client round trips of an uncontended read and write of a
// dlock.RWMutex with n readers, beside a Mutex's Lock+Unlock
// (docs/rwmutex.md, Cost): a read is the gate's acquire and release, the
// record's read, a slot's acquire and release and the Semaphore's n
// inspections; a write the record's read, the gate's acquire and release
// and n inspections of the slots.
func TestRWMutexRoundTrips(t *testing.T) {
	raw := withParams(t, testenv.Endpoint(t, "DLOCK_REDIS_URL"), "prefix", testPrefix)
	c, rts := countedClient(t, raw)
	ctx := context.Background()
	l, err := New(ctx, c, Config{Prefix: testPrefix}, dlock.WithTTL(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(); _ = c.Close() })
	const rounds = 20
	base := "rw-cost-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	measure := func(lock, unlock func(context.Context) error) float64 {
		t.Helper()
		for i := 0; i <= rounds; i++ {
			if i == 1 {
				rts.Store(0) // the first round sets up subscriptions
			}
			if err := lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return float64(rts.Load()) / rounds
	}
	m, err := l.NewMutex(base + "-mutex")
	if err != nil {
		t.Fatal(err)
	}
	mutex := measure(m.Lock, m.Unlock)
	t.Logf("Mutex Lock+Unlock: %.2f round trips", mutex)
	for _, n := range []int{1, 4, 16} {
		rw, err := l.NewRWMutex(base+"-"+strconv.Itoa(n), n)
		if err != nil {
			t.Fatal(err)
		}
		read := measure(rw.RLock, rw.RUnlock)
		write := measure(rw.Lock, rw.Unlock)
		t.Logf("readers=%d: RLock+RUnlock %.2f, Lock+Unlock %.2f round trips", n, read, write)
		if want := float64(n + 5); read > want {
			t.Errorf("readers=%d: RLock+RUnlock took %.2f round trips; want at most %v", n, read, want)
		}
		if want := float64(n + 3); write > want {
			t.Errorf("readers=%d: Lock+Unlock took %.2f round trips; want at most %v", n, write, want)
		}
	}
}
