package redislua

import (
	"context"
	"testing"
	"time"
)

// A Call sent to a server that lacks its script (a restart, a failover,
// SCRIPT FLUSH) loads the script and is sent again: it runs once, and the
// server has the script afterwards.
func TestCallLoadsAMissingScript(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	k := queueKeys(t, c)
	h := NewQueueHold(NewQueueSite(Publish, "inbox", "released"), k, "owner", Millis(time.Minute))
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	v, err := QueueCall(h, "meta", true, "a1").Run(ctx, c).Result()
	if err != nil {
		t.Fatalf("queue call after SCRIPT FLUSH: %v", err)
	}
	r, err := ParseAcquire(v)
	if err != nil || !r.Acquired {
		t.Fatalf("queue call after SCRIPT FLUSH: %+v, %v; want the lock", r, err)
	}
	if ok, err := c.ScriptExists(ctx, Queue.Hash()).Result(); err != nil || !ok[0] {
		t.Fatalf("SCRIPT EXISTS after the call: %v, %v; want the script loaded", ok, err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ok, err := ParseFlag(ReleaseQueueCall(h, true, false).Run(ctx, c).Val())
	if err != nil || !ok {
		t.Fatalf("release call after SCRIPT FLUSH: %v, %v; want released", ok, err)
	}
	if n, err := c.Exists(ctx, k.Lock).Result(); err != nil || n != 0 {
		t.Fatalf("lock key after the release: %d, %v; want gone", n, err)
	}
}

// A Call's keys and arguments are the script's KEYS and ARGV, in order.
func TestCallKeysAndArgs(t *testing.T) {
	k := QueueKeys{Lock: "l", Fence: "f", Meta: "m", Queue: "q", Deadlines: "d", Channel: "c"}
	c := QueueCall(NewQueueHold(NewQueueSite(Publish, "i", "r"), k, "o", 7), "meta", false, "a")
	want := []any{"l", "f", "m", "q", "d", "c"}
	for i, v := range c.Keys() {
		if i >= len(want) || v != want[i] {
			t.Fatalf("keys %v, want %v", c.Keys(), want)
		}
	}
	wantArgs := []any{"o", int64(7), "meta", QueueTry, Publish, "i", "a"}
	if len(c.Args()) != len(wantArgs) {
		t.Fatalf("args %v, want %v", c.Args(), wantArgs)
	}
	for i, v := range c.Args() {
		if v != wantArgs[i] {
			t.Fatalf("args %v, want %v", c.Args(), wantArgs)
		}
	}
}
