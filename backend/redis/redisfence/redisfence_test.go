package redisfence_test

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/redisfence"
	"github.com/dlock-go/dlock/fence"
)

func newRedisFence(t *testing.T) *redisfence.Checker {
	t.Helper()
	c := openRedis(t)
	prefix := unique(t, "dlock-fence-test") + ":"
	cleanRedis(t, c, prefix)
	r, err := redisfence.New(c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRedisStaleWriteAndRead(t *testing.T) {
	r := newRedisFence(t)
	ctx := testCtx(t)
	const t1, t2 = dlock.Token(30), dlock.Token(31)
	if err := r.Set(ctx, "cart", t2, "two"); err != nil {
		t.Fatalf("t2's write: %v", err)
	}
	err := r.Set(ctx, "cart", t1, "one")
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Token != t1 || se.Highest != t2 {
		t.Fatalf("t1's write after t2's: got %v, want StaleError{30, 31}", err)
	}
	if _, err := r.Get(ctx, "cart", t1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("t1's read: got %v, want ErrStale", err)
	}
	if err := r.Delete(ctx, "cart", t1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("t1's delete: got %v, want ErrStale", err)
	}
	if v, err := r.Get(ctx, "cart", t2); err != nil || v != "two" {
		t.Fatalf("t2's read: %q, %v", v, err)
	}
	// A newer read shuts the older holder out.
	if _, err := r.Get(ctx, "cart", t2+1); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "cart", t2, "late"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write after a newer read: got %v, want ErrStale", err)
	}
	if h, err := r.Highest(ctx, "cart"); err != nil || h != t2+1 {
		t.Fatalf("Highest = %d, %v", h, err)
	}
	// Delete keeps the fence; a read then finds nothing but still fences.
	if err := r.Delete(ctx, "cart", t2+1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(ctx, "cart", t2+1); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("read after delete: got %v, want ErrNotFound", err)
	}
	if err := r.Set(ctx, "cart", t2, "late"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write after delete: got %v, want ErrStale", err)
	}
	// Per-key independence, and the empty value.
	if err := r.Set(ctx, "other", 1, ""); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get(ctx, "other", 1); err != nil || v != "" {
		t.Fatalf("empty value: %q, %v", v, err)
	}
	if _, err := r.Get(ctx, "fresh", 1); !errors.Is(err, fence.ErrNotFound) {
		t.Fatalf("read of nothing: got %v, want ErrNotFound", err)
	}
	if h, _ := r.Highest(ctx, "fresh"); h != 1 {
		t.Fatalf("a read of nothing left fence %d, want 1", h)
	}
}

// TestRedisLargeTokens: tokens that differ only beyond 2^53 (where Lua's
// doubles round) are still ordered exactly.
func TestRedisLargeTokens(t *testing.T) {
	r := newRedisFence(t)
	ctx := testCtx(t)
	big := dlock.Token(1<<62 + 2)
	if err := r.Set(ctx, "k", big, "a"); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "k", big-1, "b"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token %d after %d: got %v, want ErrStale", big-1, big, err)
	}
	if err := r.Set(ctx, "k", math.MaxUint64-1, "c"); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "k", math.MaxUint64-2, "d"); !errors.Is(err, fence.ErrStale) {
		t.Fatal("MaxUint64-2 after MaxUint64-1 accepted")
	}
	if err := r.Set(ctx, "k", math.MaxUint64, "e"); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Highest(ctx, "k"); err != nil || h != math.MaxUint64 {
		t.Fatalf("Highest = %d, %v", h, err)
	}
}

func TestRedisBadInput(t *testing.T) {
	r := newRedisFence(t)
	ctx := testCtx(t)
	if err := r.Set(ctx, "k", 0, "v"); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("token 0: got %v, want ErrNoToken", err)
	}
	if _, err := r.Get(ctx, "k", 0); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("read, token 0: got %v, want ErrNoToken", err)
	}
	if err := r.Set(ctx, "", 1, "v"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("empty key: got %v, want ErrInvalid", err)
	}
	if _, err := redisfence.New(nil, ""); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("nil client: got %v", err)
	}
	if h, _ := r.Highest(ctx, "k"); h != 0 {
		t.Errorf("bad input raised the fence to %d", h)
	}
	// A fence overwritten with garbage is reported, not compared.
	c := openRedis(t)
	if err := c.HSet(ctx, r.Key("bad"), "fence", "12").Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "bad", 5, "v"); err == nil || errors.Is(err, fence.ErrStale) {
		t.Errorf("malformed stored fence: got %v, want an error", err)
	}
}

// TestRedisConcurrent: many goroutines offer tokens on a few keys; the
// final fence and value are those of the largest token.
func TestRedisConcurrent(t *testing.T) {
	r := newRedisFence(t)
	ctx := testCtx(t)
	const keys, goroutines, perG = 3, 16, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				k := fmt.Sprint("key", (g+i)%keys)
				tok := dlock.Token(1 + (g*perG+i*7)%(goroutines*perG))
				err := r.Set(ctx, k, tok, fmt.Sprint(tok))
				if err != nil && !errors.Is(err, fence.ErrStale) {
					t.Error(err)
					return
				}
				if err == nil {
					mu.Lock()
					accepted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for k := 0; k < keys; k++ {
		key := fmt.Sprint("key", k)
		h, err := r.Highest(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		v, err := r.Get(ctx, key, h)
		if err != nil || v != fmt.Sprint(h) {
			t.Errorf("%s: fence %d but value %q (%v): a lower token's write landed last", key, h, v, err)
		}
	}
	t.Logf("%d of %d writes accepted", accepted, goroutines*perG)
}
