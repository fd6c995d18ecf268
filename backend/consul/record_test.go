package consul

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// recDriver opens a driver of its own (as a separate process would) under
// the test prefix plus sub, closed when the test ends.
func recDriver(t *testing.T, sub string) *consulDriver {
	t.Helper()
	u := testURL(t, endpoint(t), "lockdelay=0s")
	u.Path += sub
	d, err := open(ctxFor(t, 30*time.Second), u)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d.(*consulDriver)
}

func mustRecord(t *testing.T, d *consulDriver, key, value, want string) {
	t.Helper()
	got, err := d.Record(ctxFor(t, 30*time.Second), key, value)
	if err != nil {
		t.Fatalf("Record(%.40q, %q): %v", key, value, err)
	}
	if got != want {
		t.Fatalf("Record(%.40q, %q) = %q; want %q", key, value, got, want)
	}
}

// clearAfter deletes the records of the given keys now (keys shared by
// every run may have one left from a run that failed) and when the test
// ends.
func clearAfter(t *testing.T, d *consulDriver, keys ...string) {
	a := newAdmin(t, endpoint(t))
	del := func() {
		for _, k := range keys {
			_, _ = a.c.KV().Delete(d.recordPath(k), nil)
		}
	}
	del()
	t.Cleanup(del)
}

// The first value wins, for the driver that wrote it and for any other;
// the record has no session and lives under the Locker's prefix.
func TestRecordFirstWins(t *testing.T) {
	d1, d2 := recDriver(t, ""), recDriver(t, "")
	key := testKey(t, "sem")
	clearAfter(t, d1, key)
	mustRecord(t, d1, key, "permits=3", "permits=3")
	mustRecord(t, d1, key, "permits=5", "permits=3")
	mustRecord(t, d2, key, "permits=7", "permits=3")
	kv, _, err := newAdmin(t, endpoint(t)).c.KV().Get(testPrefix+"/"+recordDir+"/"+encodeKey(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	if kv == nil || string(kv.Value) != "permits=3" || kv.Session != "" {
		t.Fatalf("record in Consul: %+v; want permits=3 without a session", kv)
	}
	other := recDriver(t, "/other")
	clearAfter(t, other, key)
	mustRecord(t, other, key, "permits=9", "permits=9")
	mustRecord(t, d2, key, "permits=9", "permits=3")
}

// Concurrent Record calls with different values from separate clients all
// return one of them.
func TestRecordRace(t *testing.T) {
	const n = 8
	ds := make([]*consulDriver, n)
	for i := range ds {
		ds[i] = recDriver(t, "")
	}
	for round := 0; round < 5; round++ {
		key := testKey(t, fmt.Sprintf("race-%d", round))
		clearAfter(t, ds[0], key)
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = ds[i].Record(ctxFor(t, 30*time.Second), key, fmt.Sprintf("permits=%d", i+1))
			}()
		}
		close(start)
		wg.Wait()
		for i := range ds {
			if errs[i] != nil {
				t.Fatalf("round %d: Record %d: %v", round, i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("round %d: Record returned %q to one caller and %q to another", round, got[0], got[i])
			}
		}
		if !strings.HasPrefix(got[0], "permits=") {
			t.Fatalf("round %d: Record returned %q, no caller's value", round, got[0])
		}
		mustRecord(t, ds[0], key, "permits=100", got[0])
	}
}

// ClearRecord deletes only a record with the given value.
func TestClearRecord(t *testing.T) {
	d := recDriver(t, "")
	key := testKey(t, "c")
	clearAfter(t, d, key)
	ctx := ctxFor(t, 30*time.Second)
	if ok, err := d.ClearRecord(ctx, key, "permits=1"); err != nil || ok {
		t.Fatalf("ClearRecord of no record = %v, %v; want false, nil", ok, err)
	}
	mustRecord(t, d, key, "permits=1", "permits=1")
	if ok, err := d.ClearRecord(ctx, key, "permits=2"); err != nil || ok {
		t.Fatalf("ClearRecord with another value = %v, %v; want false, nil", ok, err)
	}
	mustRecord(t, d, key, "permits=2", "permits=1")
	if ok, err := d.ClearRecord(ctx, key, "permits=1"); err != nil || !ok {
		t.Fatalf("ClearRecord with the value = %v, %v; want true, nil", ok, err)
	}
	if ok, err := d.ClearRecord(ctx, key, "permits=1"); err != nil || ok {
		t.Fatalf("second ClearRecord = %v, %v; want false, nil", ok, err)
	}
	mustRecord(t, d, key, "permits=2", "permits=2")
}

// A lock on the record's key (and on keys whose encoding looks like the
// records' segment) leaves the record alone through acquire, release,
// Break and session expiry; Inspect never sees the record; clearing a
// record does not end a hold.
func TestRecordApartFromLock(t *testing.T) {
	d := recDriver(t, "")
	ctx := ctxFor(t, 2*time.Minute)
	keys := []string{testKey(t, "k"), "~records", "~records/" + testKey(t, "k")}
	clearAfter(t, d, keys...)
	for i, key := range keys {
		mustRecord(t, d, key, "permits=2", "permits=2")
		free := func(when string) {
			t.Helper()
			info, err := d.Inspect(ctx, key)
			if err != nil {
				t.Fatalf("Inspect %s: %v", when, err)
			}
			if info.Held {
				t.Fatalf("Inspect(%q) %s = %+v; want free", key, when, info)
			}
			mustRecord(t, d, key, "permits=3", "permits=2")
		}
		free("with only a record")
		req := driver.Request{Key: key, TTL: MinTTL, Owner: "a"}
		h, err := d.TryAcquire(ctx, req)
		if err != nil {
			t.Fatalf("TryAcquire(%q) with a record: %v", key, err)
		}
		if err := d.Release(ctx, h); err != nil {
			t.Fatalf("Release: %v", err)
		}
		free("after Release")

		if _, err = d.TryAcquire(ctx, req); err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		if info, err := d.Break(ctx, key); err != nil || !info.Held {
			t.Fatalf("Break = %+v, %v; want the hold broken", info, err)
		}
		free("after Break")

		h, err = d.TryAcquire(ctx, req)
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		if ok, err := d.ClearRecord(ctx, key, "permits=2"); err != nil || !ok {
			t.Fatalf("ClearRecord while held = %v, %v", ok, err)
		}
		mustRecord(t, d, key, "permits=2", "permits=2")
		if _, err := d.Renew(ctx, h); err != nil {
			t.Fatalf("Renew after the record was cleared: %v", err)
		}
		if i > 0 {
			if err := d.Release(ctx, h); err != nil {
				t.Fatalf("Release: %v", err)
			}
			continue
		}
		// Not renewed again: the session expires (Consul takes up to
		// twice its TTL) and deletes the lock key.
		deadline := time.Now().Add(3*MinTTL + 10*time.Second)
		for {
			info, err := d.Inspect(ctx, key)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if !info.Held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("hold not expired long after its last renewal")
			}
			time.Sleep(500 * time.Millisecond)
		}
		free("after expiry")
	}
}

// Keys of any bytes, up to MaxKeyLen, have records of their own.
func TestRecordOddKeys(t *testing.T) {
	d := recDriver(t, "")
	base := testKey(t, "")
	keys := []string{"a", "a/b", "a~2Fb", "..", ".", "", "/", "ключ🔒", "\x00\xff", "~records",
		base + strings.Repeat("\x00", driver.MaxKeyLen-len(base)),
		base + strings.Repeat("/..", (driver.MaxKeyLen-len(base))/3)}
	for i := range keys[:10] {
		keys[i] = base + keys[i]
	}
	keys = append(keys, "", "..", "~records")
	clearAfter(t, d, keys...)
	for i, k := range keys {
		mustRecord(t, d, k, fmt.Sprintf("v%d", i), fmt.Sprintf("v%d", i))
	}
	for i, k := range keys {
		mustRecord(t, d, k, "other", fmt.Sprintf("v%d", i))
	}
	long := strings.Repeat("é", driver.MaxRecordLen/2)
	mustRecord(t, d, base+"long-value", long, long)
	clearAfter(t, d, base+"long-value")
	for i, k := range keys {
		if ok, err := d.ClearRecord(ctxFor(t, 10*time.Second), k, fmt.Sprintf("v%d", i)); err != nil || !ok {
			t.Fatalf("ClearRecord(%.40q) = %v, %v; want true", k, ok, err)
		}
	}
}

// A cancelled context and a closed driver give errors, not a record.
func TestRecordContextAndClose(t *testing.T) {
	d := recDriver(t, "")
	key := testKey(t, "x")
	clearAfter(t, d, key)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Record(ctx, key, "permits=1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := d.ClearRecord(ctx, key, "permits=1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ClearRecord with a cancelled context: %v; want context.Canceled", err)
	}
	mustRecord(t, d, key, "permits=2", "permits=2")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Record(ctxFor(t, 10*time.Second), key, "permits=1"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Record after Close: %v; want ErrClosed", err)
	}
	if _, err := d.ClearRecord(ctxFor(t, 10*time.Second), key, "permits=2"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("ClearRecord after Close: %v; want ErrClosed", err)
	}
}
