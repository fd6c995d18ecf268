package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A value this backend did not write at a lock key is a clear error, for
// TryLock and for Lock (which must not wait on it), and is left alone.
func TestNotALock(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		raw := withParams(t, endpoint, "prefix", testPrefix)
		admin := adminClient(t, raw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		key := "notalock/" + t.Name() + "/" + time.Now().Format(time.RFC3339Nano)
		lockKey := LockKey(testPrefix, key)
		defer admin.Del(context.Background(), lockKey)
		m := openMutex(ctx, t, raw, key)
		check := func(what string) {
			t.Helper()
			err := m.TryLock(ctx)
			if !errors.Is(err, ErrNotALock) || errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("TryLock on %s: %v; want ErrNotALock", what, err)
			}
			lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
			defer lcancel()
			start := time.Now()
			err = m.Lock(lctx)
			if !errors.Is(err, ErrNotALock) {
				t.Fatalf("Lock on %s: %v; want ErrNotALock", what, err)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("Lock on %s took %v; want an error at once", what, el)
			}
			if m.Token() != 0 {
				t.Fatalf("%s: Token() = %d after a failed lock", what, m.Token())
			}
		}

		if err := admin.HSet(ctx, lockKey, "field", "value").Err(); err != nil {
			t.Fatal(err)
		}
		check("a hash")
		if v := admin.HGet(ctx, lockKey, "field").Val(); v != "value" {
			t.Fatalf("the hash was changed: field=%q", v)
		}

		admin.Del(ctx, lockKey)
		if err := admin.Set(ctx, lockKey, "not a lock", 0).Err(); err != nil {
			t.Fatal(err)
		}
		check("a string without expiry")
		if v := admin.Get(ctx, lockKey).Val(); v != "not a lock" {
			t.Fatalf("the string was changed: %q", v)
		}

		// A held lock replaced from outside by a hash: Unlock reports an
		// error and leaves the hash.
		admin.Del(ctx, lockKey)
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		admin.Del(ctx, lockKey)
		admin.HSet(ctx, lockKey, "field", "value")
		if err := m.Unlock(ctx); err == nil {
			t.Fatal("Unlock of a lock replaced by a hash returned nil")
		}
		if v := admin.HGet(ctx, lockKey, "field").Val(); v != "value" {
			t.Fatalf("Unlock changed the hash: field=%q", v)
		}
	})
}
