package redislua

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// RenewMany answers for each key what Renew alone would: the owner's lock
// is extended, another owner's, a missing key and an expired one are left
// alone with 0, and a key that is not a lock fails with WRONGTYPE without
// failing the others.
func TestRenewManyAnswersPerKey(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, _, _ := testKeys(t, c)
	k := func(i int) string { return fmt.Sprintf("%s:%d", lock, i) }
	for i := range 5 {
		t.Cleanup(func() { c.Del(context.Background(), k(i)) })
	}
	c.Set(ctx, k(0), "a", time.Second)            // ours: extended
	c.Set(ctx, k(1), "someone else", time.Second) // another owner's
	// k(2) is missing
	c.HSet(ctx, k(3), "field", "value")  // not a lock
	c.Set(ctx, k(4), "a", 5*time.Second) // ours, with its own TTL

	var keys [][]string
	var args [][]any
	for i, ttl := range []time.Duration{time.Hour, time.Hour, time.Hour, time.Hour, 2 * time.Hour} {
		ks, as := RenewArgs(k(i), "a", Millis(ttl))
		keys, args = append(keys, ks), append(args, as)
	}
	ks, as := RenewManyArgs(keys, args)
	v, err := RenewMany.Run(ctx, c, ks, as...).Result()
	if err != nil {
		t.Fatalf("RenewMany: %v", err)
	}
	vals, errs, err := ParseRenewMany(v, len(keys))
	if err != nil {
		t.Fatal(err)
	}
	want := []bool{true, false, false, false, true}
	for i := range want {
		if i == 3 {
			if !IsNotALock(errs[i]) {
				t.Fatalf("key %d, a hash: %v, %v; want WRONGTYPE", i, vals[i], errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("key %d: %v", i, errs[i])
		}
		ok, err := ParseFlag(vals[i])
		if err != nil || ok != want[i] {
			t.Fatalf("key %d: %v, %v; want %v", i, ok, err, want[i])
		}
	}
	if pttl := c.PTTL(ctx, k(0)).Val(); pttl < 30*time.Minute {
		t.Fatalf("our lock's PTTL %v after RenewMany; want about an hour", pttl)
	}
	if pttl := c.PTTL(ctx, k(4)).Val(); pttl < 90*time.Minute {
		t.Fatalf("our second lock's PTTL %v; want about its own two hours", pttl)
	}
	if pttl := c.PTTL(ctx, k(1)).Val(); pttl > time.Second {
		t.Fatalf("another owner's lock has PTTL %v after RenewMany; want it unchanged", pttl)
	}
	if n := c.Exists(ctx, k(2)).Val(); n != 0 {
		t.Fatal("RenewMany created a missing key")
	}
	if v := c.HGet(ctx, k(3), "field").Val(); v != "value" {
		t.Fatalf("hash changed: field=%q", v)
	}
	if _, _, err := ParseRenewMany(v, len(keys)+1); err == nil {
		t.Fatal("a reply of the wrong length parsed")
	}
}
