package redislua

import (
	"context"
	"testing"
)

// Record writes its value only where nothing is, without expiry, and
// replies the record; ClearRecord deletes only the value it is given; a
// key of another type is refused and left alone.
func TestRecordScripts(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, _, _ := testKeys(t, c)
	rec := lock + ":record"
	t.Cleanup(func() { c.Del(context.Background(), rec) })
	record := func(v string) string {
		t.Helper()
		keys, args := RecordArgs(rec, v)
		r, err := Record.Run(ctx, c, keys, args...).Result()
		if err != nil {
			t.Fatalf("Record(%q): %v", v, err)
		}
		s, err := ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	clearRec := func(v string) bool {
		t.Helper()
		keys, args := RecordArgs(rec, v)
		r, err := ClearRecord.Run(ctx, c, keys, args...).Result()
		if err != nil {
			t.Fatalf("ClearRecord(%q): %v", v, err)
		}
		ok, err := ParseFlag(r)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if got := record("a"); got != "a" {
		t.Fatalf("first Record: %q; want a", got)
	}
	if got := record("b"); got != "a" {
		t.Fatalf("second Record: %q; want a", got)
	}
	if ttl := c.PTTL(ctx, rec).Val(); ttl != -1 {
		t.Fatalf("record PTTL %v; want none", ttl)
	}
	if clearRec("b") {
		t.Fatal("ClearRecord of another value deleted the record")
	}
	if !clearRec("a") {
		t.Fatal("ClearRecord of the value did not delete it")
	}
	if n := c.Exists(ctx, rec).Val(); n != 0 {
		t.Fatal("record still there")
	}
	if got := record("b"); got != "b" {
		t.Fatalf("Record after clear: %q; want b", got)
	}

	c.Del(ctx, rec)
	c.HSet(ctx, rec, "f", "v")
	keys, args := RecordArgs(rec, "a")
	if err := Record.Run(ctx, c, keys, args...).Err(); !IsNotALock(err) {
		t.Fatalf("Record over a hash: %v; want WRONGTYPE", err)
	}
	if err := ClearRecord.Run(ctx, c, keys, args...).Err(); !IsNotALock(err) {
		t.Fatalf("ClearRecord over a hash: %v; want WRONGTYPE", err)
	}
	if v := c.HGet(ctx, rec, "f").Val(); v != "v" {
		t.Fatalf("hash changed: f=%q", v)
	}
}

func TestParseRecordRejectsOddReplies(t *testing.T) {
	for _, v := range []any{nil, int64(1), []any{"a"}} {
		if _, err := ParseRecord(v); err == nil {
			t.Errorf("ParseRecord(%#v) accepted", v)
		}
	}
}
