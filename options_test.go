package dlock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// unlimited is a driver that declares no Limits.
type unlimited struct{ driver.Locker }

// overLimit is a driver that declares a maximum above dlock.MaxTTL.
type overLimit struct{ driver.Locker }

func (overLimit) Limits() driver.Limits { return driver.Limits{MaxTTL: math.MaxInt64} }

// A driver that declares no maximum, or one beyond dlock.MaxTTL, is held
// to dlock.MaxTTL: a longer TTL is refused at NewLocker and NewMutex with
// ErrInvalidOption naming it, and MaxTTL itself is accepted.
func TestMaxTTLWithoutDriverLimit(t *testing.T) {
	for name, wrap := range map[string]func(driver.Locker) driver.Locker{
		"none":     func(d driver.Locker) driver.Locker { return unlimited{d} },
		"above":    func(d driver.Locker) driver.Locker { return overLimit{d} },
		"declared": func(d driver.Locker) driver.Locker { return d },
	} {
		t.Run(name, func(t *testing.T) {
			store := memory.NewStore()
			for _, ttl := range []time.Duration{dlock.MaxTTL + time.Nanosecond, math.MaxInt64} {
				l, err := dlock.NewLocker(wrap(store.Driver()), dlock.WithTTL(ttl))
				if err == nil {
					_ = l.Close()
				}
				if !errors.Is(err, dlock.ErrInvalidOption) || !strings.Contains(err.Error(), dlock.MaxTTL.String()) {
					t.Errorf("NewLocker with WithTTL(%v): %v; want ErrInvalidOption naming %v", ttl, err, dlock.MaxTTL)
				}
			}
			l, err := dlock.NewLocker(wrap(store.Driver()))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if _, err := l.NewMutex("k", dlock.WithTTL(math.MaxInt64)); !errors.Is(err, dlock.ErrInvalidOption) ||
				!strings.Contains(err.Error(), dlock.MaxTTL.String()) {
				t.Errorf("NewMutex with WithTTL(math.MaxInt64): %v; want ErrInvalidOption naming %v", err, dlock.MaxTTL)
			}
			m, err := l.NewMutex("k", dlock.WithTTL(dlock.MaxTTL))
			if err != nil {
				t.Fatalf("NewMutex with WithTTL(MaxTTL): %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := m.Lock(ctx); err != nil {
				t.Fatalf("Lock with MaxTTL: %v", err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}

// Open's ttl= too long for a time.Duration is a TTL above MaxTTL, refused
// as one (ErrInvalidOption, naming MaxTTL), not as a malformed parameter.
func TestOpenTTLBeyondDuration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, v := range []string{"1000000000h", "9223372036854775808ns", "2562048h"} {
		l, err := dlock.Open(ctx, "mem://ttl-beyond?ttl="+v)
		if err == nil {
			_ = l.Close()
		}
		if !errors.Is(err, dlock.ErrInvalidURL) || !errors.Is(err, dlock.ErrInvalidOption) || !strings.Contains(err.Error(), dlock.MaxTTL.String()) {
			t.Errorf("Open with ttl=%s: %v; want ErrInvalidURL and ErrInvalidOption naming %v", v, err, dlock.MaxTTL)
		}
	}
	for _, v := range []string{"abc", "1e9h", "5", "1.2.3s"} {
		l, err := dlock.Open(ctx, "mem://ttl-beyond?ttl="+v)
		if err == nil {
			_ = l.Close()
		}
		if !errors.Is(err, dlock.ErrInvalidURL) || errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("Open with ttl=%s: %v; want ErrInvalidURL alone (malformed)", v, err)
		}
	}
}

// Do with no lock or no function is a typed error, not a panic.
func TestDoNilIsInvalidOption(t *testing.T) {
	ctx := context.Background()
	if err := dlock.Do(ctx, nil, func(context.Context) error { return nil }); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Do(nil lock) = %v; want ErrInvalidOption", err)
	}
	l, err := dlock.Open(ctx, "mem://do-nil")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("k")
	if err := dlock.Do(ctx, m, nil); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Do(nil fn) = %v; want ErrInvalidOption", err)
	}
	if m.Token() != 0 {
		t.Error("Do(nil fn) took the lock")
	}
}
