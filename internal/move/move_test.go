package move_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/file"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/move"
	"github.com/dlock-go/dlock/internal/move/movetest"
)

func c1URL(from, to string) string {
	return "move:?from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
}

func c2URL(to string) string { return "move:?to=" + url.QueryEscape(to) }

func open(t *testing.T, raw string, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(context.Background(), raw, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func commit(t *testing.T, from, to string) move.Record {
	t.Helper()
	ctx := context.Background()
	x, err := dlock.OpenDriver(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := dlock.OpenDriver(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	r, _, err := move.Commit(ctx, x, y, "test")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func uniq(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + time.Now().Format("150405.000000000")
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	n := uniq(t)
	cases := []struct {
		name string
		url  string
		want []error
		msg  string
	}{
		{"same URL", c1URL("mem://"+n, "mem://"+n), []error{dlock.ErrInvalidURL}, "same store"},
		{"same store, two URLs", c1URL("file://"+dir, "file://"+dir+"/"), []error{dlock.ErrInvalidURL}, "same store"},
		{"no to", "move:?from=" + url.QueryEscape("mem://a"), []error{dlock.ErrInvalidURL}, "to="},
		{"unknown parameter", c1URL("mem://a"+n, "mem://b"+n) + "&x=1", []error{dlock.ErrInvalidURL}, "x"},
		{"malformed inner", c1URL("mem://a"+n, "nosuch://b"), []error{dlock.ErrInvalidURL}, "nosuch"},
		{"inner ttl", c1URL("mem://a"+n+"?ttl=1s", "mem://b"+n), []error{dlock.ErrInvalidURL}, "ttl="},
		{"nested", c1URL("mem://a"+n, c2URL("mem://b"+n)), []error{dlock.ErrInvalidURL}, "inside a move"},
		{"host", "move://h?to=mem://b", []error{dlock.ErrInvalidURL}, "want move:?from"},
		{"C2 without commit", c2URL("mem://c2" + n), []error{dlock.ErrInvalidOption}, "not committed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := dlock.Open(ctx, c.url)
			if err == nil {
				_ = l.Close()
				t.Fatalf("Open(%s) succeeded", c.url)
			}
			for _, w := range c.want {
				if !errors.Is(err, w) {
					t.Errorf("error %v does not match %v", err, w)
				}
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not say %q", err, c.msg)
			}
		})
	}
}

func TestIntersectLimits(t *testing.T) {
	etcdLike := driver.Limits{MinTTL: 2 * time.Second, MaxTTL: time.Hour}
	short := driver.Limits{MaxTTL: time.Second}
	if _, err := move.Intersect(etcdLike, short); !errors.Is(err, driver.ErrInvalidOption) {
		t.Fatalf("disjoint limits: %v, want ErrInvalidOption", err)
	}
	got, err := move.Intersect(etcdLike, driver.Limits{MinTTL: time.Second, MaxTTL: 10 * time.Minute})
	if err != nil || got != (driver.Limits{MinTTL: 2 * time.Second, MaxTTL: 10 * time.Minute}) {
		t.Fatalf("intersection = %v, %v", got, err)
	}
	if got, _ := move.Intersect(driver.Limits{}, etcdLike); got != etcdLike {
		t.Fatalf("with no limits = %v", got)
	}
}

// TestExcludesEveryConfiguration: a C1 holder excludes plain holders of
// either store, and each of them excludes C1.
func TestExcludesEveryConfiguration(t *testing.T) {
	ctx := context.Background()
	n := uniq(t)
	x, y := "mem://x"+n, "mem://y"+n
	c0, c1 := open(t, x), open(t, c1URL(x, y))
	plainY := open(t, y)
	m1, _ := c1.NewMutex("k")
	if err := m1.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*dlock.Locker{"X": c0, "Y": plainY} {
		m, _ := l.NewMutex("k")
		if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("plain %s TryLock while C1 holds: %v", name, err)
		}
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*dlock.Locker{"X": c0, "Y": plainY} {
		m, _ := l.NewMutex("k")
		if err := m.TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m1.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("C1 TryLock while plain %s holds: %v", name, err)
		}
		if info, _ := c1.Inspect(ctx, "k"); !info.Held {
			t.Fatalf("C1 Inspect while plain %s holds: %+v", name, info)
		}
		_ = m.Unlock(ctx)
	}
	// Y refused: nothing is left on X.
	if err := m1.TryLock(ctx); err != nil {
		t.Fatalf("C1 TryLock once free: %v", err)
	}
}

// TestMinHoldAcrossConfigurations: a C1 hold with a minimum hold,
// unlocked at once, keeps the key held on both stores until the minimum:
// a C0 instance (on X) and a C2-side Locker (on Y) are refused, then both
// get it.
func TestMinHoldAcrossConfigurations(t *testing.T) {
	ctx := context.Background()
	n := uniq(t)
	x, y := "file://"+t.TempDir()+"/x"+n, "mem://y"+n
	c1 := open(t, c1URL(x, y))
	const minHold = 5 * time.Second
	m1, err := c1.NewMutex("k", dlock.WithMinHold(minHold))
	if err != nil {
		t.Fatalf("NewMutex with a minimum hold through move: %v", err)
	}
	if err := m1.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	others := map[string]*dlock.Locker{"X": open(t, x), "Y": open(t, y)}
	for name, l := range others {
		m, _ := l.NewMutex("k")
		err := m.TryLock(ctx)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("plain %s TryLock inside the minimum hold: %v; want ErrNotAcquired", name, err)
		}
	}
	time.Sleep(time.Until(granted.Add(minHold + 100*time.Millisecond)))
	for name, l := range others {
		m, _ := l.NewMutex("k")
		if err := m.TryLock(ctx); err != nil {
			t.Fatalf("plain %s TryLock after the minimum hold: %v", name, err)
		}
		_ = m.Unlock(ctx)
	}
}

// TestLossOnEitherStore: breaking the key on X, or on Y, ends the C1 hold
// at once, through the stores' loss signals (no renewal runs, and the
// lease is long).
func TestLossOnEitherStore(t *testing.T) {
	for _, side := range []string{"x", "y"} {
		t.Run(side, func(t *testing.T) {
			ctx := context.Background()
			n := uniq(t)
			x, y := "mem://x"+n, "mem://y"+n
			c1 := open(t, c1URL(x, y), dlock.WithTTL(time.Minute), dlock.WithAutoRenew(false))
			m, _ := c1.NewMutex("k")
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			plain := open(t, map[string]string{"x": x, "y": y}[side])
			if info, err := plain.Break(ctx, "k"); err != nil || !info.Held {
				t.Fatalf("Break on %s: %+v, %v", side, info, err)
			}
			select {
			case <-m.Done():
			case <-time.After(10 * time.Second):
				t.Fatalf("hold still live 10s after its %s side was broken", side)
			}
			if err := m.Unlock(ctx); err == nil {
				t.Fatal("Unlock of a lost hold succeeded")
			}
		})
	}
}

// TestCloseReleasesBoth: closing a C1 Locker frees its keys on both
// stores.
func TestCloseReleasesBoth(t *testing.T) {
	ctx := context.Background()
	n := uniq(t)
	x, y := "mem://x"+n, "mem://y"+n
	c1, err := dlock.Open(ctx, c1URL(x, y))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c1.NewMutex("k")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{x, y} {
		l := open(t, u)
		if info, err := l.Inspect(ctx, "k"); err != nil || info.Held {
			t.Fatalf("%s after Close: %+v, %v", u, info, err)
		}
	}
	if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock after Close: %v", err)
	}
}

func TestReservedRecordKeys(t *testing.T) {
	n := uniq(t)
	c1 := open(t, c1URL("mem://x"+n, "mem://y"+n))
	if _, err := c1.NewSemaphore(move.Prefix+"s", 2); err == nil {
		// NewSemaphore records lazily; its first Acquire must fail.
		s, _ := c1.NewSemaphore(move.Prefix+"s", 2)
		if err := s.TryLock(context.Background()); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Fatalf("semaphore on a reserved key: %v", err)
		}
	}
}

var _ = memory.Scheme

func TestTokensIncreaseMemToFile(t *testing.T) {
	movetest.RunTokens(t, "mem://x"+uniq(t), "file://"+t.TempDir(), "k/")
}

func TestTokensIncreaseFileToMem(t *testing.T) {
	movetest.RunTokens(t, "file://"+t.TempDir(), "mem://y"+uniq(t), "k/")
}

// TestSemaphoreRecordMoves: the number of permits a C0 or C1 client
// recorded on X is found by C2 on Y: a C2 client of another number is
// refused, one of the same number takes a permit.
func TestSemaphoreRecordMoves(t *testing.T) {
	ctx := context.Background()
	n := uniq(t)
	x, y := "mem://x"+n, "mem://y"+n
	c0 := open(t, x)
	s0, _ := c0.NewSemaphore("pool", 3)
	if err := s0.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = s0.Unlock(ctx)
	c1 := open(t, c1URL(x, y))
	s1, _ := c1.NewSemaphore("pool", 3)
	if err := s1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = s1.Unlock(ctx)
	commit(t, x, y)
	c2 := open(t, movetest.C2(y))
	bad, _ := c2.NewSemaphore("pool", 5)
	if err := bad.Lock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("C2 semaphore of 5 permits where 3 are recorded: %v", err)
	}
	good, _ := c2.NewSemaphore("pool", 3)
	if err := good.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = good.Unlock(ctx)
}

// TestRWMutexAcrossConfigurations: a reader in one configuration keeps a
// writer of the configuration beside it out, before the commit (C0 and
// C1) and after it (C1 and C2).
func TestRWMutexAcrossConfigurations(t *testing.T) {
	ctx := context.Background()
	n := uniq(t)
	x, y := "mem://x"+n, "mem://y"+n
	pairs := func(reader, writer *dlock.Locker, what string) {
		t.Helper()
		r, _ := reader.NewRWMutex("rw", 2)
		w, _ := writer.NewRWMutex("rw", 2)
		if err := r.TryRLock(ctx); err != nil {
			t.Fatalf("%s: reader: %v", what, err)
		}
		if err := w.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: writer while a reader holds: %v", what, err)
		}
		if err := r.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := w.TryLock(ctx); err != nil {
			t.Fatalf("%s: writer once the reader left: %v", what, err)
		}
		if err := r.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: reader while the writer holds: %v", what, err)
		}
		_ = w.Unlock(ctx)
	}
	c0, c1 := open(t, x), open(t, c1URL(x, y))
	pairs(c0, c1, "C0 reader, C1 writer")
	pairs(c1, c0, "C1 reader, C0 writer")
	_ = c0.Close()
	commit(t, x, y)
	c2 := open(t, movetest.C2(y))
	pairs(c1, c2, "C1 reader, C2 writer")
	pairs(c2, c1, "C2 reader, C1 writer")
}
