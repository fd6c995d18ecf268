package redlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// TestValidityWindow checks that the lease ends TTL - TTL*drift - 2ms after
// the acquire (and each renewal) was sent, with the default drift factor
// and with a larger one.
func TestValidityWindow(t *testing.T) {
	ep := endpoint(t)
	const ttl = 10 * time.Second
	for _, drift := range []float64{0.01, 0.2} {
		allowance := time.Duration(float64(ttl)*drift) + 2*time.Millisecond
		d := openDriver(t, withParams(t, ep, "prefix", testPrefix(), "timeout", "2s", "drift", fmtFloat(drift)))
		l, err := dlock.NewLocker(d, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		m, _ := l.NewMutex("k")
		before := time.Now()
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		lease := m.Lease()
		if lease.TTL != ttl {
			t.Errorf("drift %v: Lease().TTL = %v; want the granted %v", drift, lease.TTL, ttl)
		}
		// Expires = sent + TTL - drift, sent between before and after.
		within(t, "Lock", lease.Expires.Add(-(ttl - allowance)), before, after)
		before = time.Now()
		if err := m.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		within(t, "Renew", m.Lease().Expires.Add(-(ttl - allowance)), before, time.Now())
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		_ = l.Close()
	}
}

func within(t *testing.T, what string, sent, before, after time.Time) {
	t.Helper()
	const rounding = time.Millisecond
	if sent.Before(before.Add(-rounding)) || sent.After(after.Add(rounding)) {
		t.Errorf("%s: the lease runs from %v after the call began (the call took %v); want TTL - TTL*drift - 2ms from the send",
			what, sent.Sub(before), after.Sub(before))
	}
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
