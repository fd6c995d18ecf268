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
	c.Set(ctx, k(4), "b", 5*time.Second) // ours, another owner string

	keys := []string{k(0), k(1), k(2), k(3), k(4)}
	ks, as := RenewManyArgs(keys, []string{"a", "a", "a", "a", "b"}, Millis(time.Hour))
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
	if pttl := c.PTTL(ctx, k(4)).Val(); pttl < 30*time.Minute {
		t.Fatalf("our second lock's PTTL %v after RenewMany; want about an hour", pttl)
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
	for _, bad := range []any{
		int64(1),                  // not an array
		[]any{int64(2)},           // half a pair
		[]any{int64(6), int64(0)}, // no sixth key
		[]any{int64(0), int64(0)}, // indexes count from 1
		[]any{"2", int64(0)},      // not an index
		[]any{int64(1), int64(0), int64(1), int64(0), int64(1), int64(0), int64(1), int64(0), int64(1), int64(0), int64(1), int64(0)}, // more pairs than keys
	} {
		if _, _, err := ParseRenewMany(bad, len(keys)); err == nil {
			t.Errorf("reply %#v parsed", bad)
		}
	}
}

// A RenewMany that extends every key replies an empty array, which parses
// as Renew's 1 for each.
func TestRenewManyAllExtended(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, _, _ := testKeys(t, c)
	var keys, owners []string
	for i := range 3 {
		k := fmt.Sprintf("%s:%d", lock, i)
		t.Cleanup(func() { c.Del(context.Background(), k) })
		c.Set(ctx, k, fmt.Sprint("owner", i), time.Second)
		keys, owners = append(keys, k), append(owners, fmt.Sprint("owner", i))
	}
	ks, as := RenewManyArgs(keys, owners, Millis(time.Hour))
	v, err := RenewMany.Run(ctx, c, ks, as...).Result()
	if err != nil {
		t.Fatalf("RenewMany: %v", err)
	}
	if s, ok := v.([]any); !ok || len(s) != 0 {
		t.Fatalf("reply %#v; want an empty array", v)
	}
	vals, errs, err := ParseRenewMany(v, len(keys))
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if ok, err := ParseFlag(vals[i]); errs[i] != nil || err != nil || !ok {
			t.Fatalf("key %d: %v, %v, %v; want renewed", i, vals[i], errs[i], err)
		}
		if pttl := c.PTTL(ctx, keys[i]).Val(); pttl < 30*time.Minute {
			t.Fatalf("key %d: PTTL %v; want about an hour", i, pttl)
		}
	}
}
