package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/driver"
)

// recordDriver opens a driver on the shared topology under prefix.
func recordDriver(t *testing.T, prefix string) *redlock.Driver {
	t.Helper()
	return openDriver(t, withParams(t, endpoint(t), "prefix", prefix, "timeout", "2s"))
}

func mustRecord(ctx context.Context, t *testing.T, d driver.Recorder, key, value, want string) {
	t.Helper()
	got, err := d.Record(ctx, key, value)
	if err != nil || got != want {
		t.Fatalf("Record(%q, %q) = %q, %v; want %q", key, value, got, err, want)
	}
}

func mustClear(ctx context.Context, t *testing.T, d driver.Recorder, key, value string, want bool) {
	t.Helper()
	got, err := d.ClearRecord(ctx, key, value)
	if err != nil || got != want {
		t.Fatalf("ClearRecord(%q, %q) = %v, %v; want %v", key, value, got, err, want)
	}
}

// The first value is on every instance, without expiry; another prefix
// has its own.
func TestRecordEveryInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := testPrefix()
	d := recordDriver(t, prefix)
	mustRecord(ctx, t, d, "sem", "permits=3", "permits=3")
	mustRecord(ctx, t, d, "sem", "permits=5", "permits=3")
	mustRecord(ctx, t, recordDriver(t, prefix), "sem", "permits=5", "permits=3")
	for i, c := range adminClients(t, hostsOf(t, endpoint(t))) {
		if v := c.Get(ctx, prefix+"c:sem").Val(); v != "permits=3" {
			t.Fatalf("instance %d holds %q; want permits=3", i, v)
		}
		if ttl := c.PTTL(ctx, prefix+"c:sem").Val(); ttl != -1 {
			t.Fatalf("instance %d: record PTTL %v; want none (-1)", i, ttl)
		}
	}
	mustRecord(ctx, t, recordDriver(t, testPrefix()), "sem", "permits=5", "permits=5")
}

// ClearRecord deletes the record on every instance.
func TestClearRecordEveryInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := testPrefix()
	d := recordDriver(t, prefix)
	admin := adminClients(t, hostsOf(t, endpoint(t)))
	mustClear(ctx, t, d, "sem", "permits=3", false)
	mustRecord(ctx, t, d, "sem", "permits=3", "permits=3")
	mustClear(ctx, t, d, "sem", "permits=4", false)
	mustRecord(ctx, t, d, "sem", "permits=4", "permits=3")
	mustClear(ctx, t, d, "sem", "permits=3", true)
	for i, c := range admin {
		if n := c.Exists(ctx, prefix+"c:sem").Val(); n != 0 {
			t.Fatalf("instance %d still has the record", i)
		}
	}
	mustClear(ctx, t, d, "sem", "permits=3", false)
	mustRecord(ctx, t, d, "sem", "permits=9", "permits=9")
}

// The record is the value of a majority of all instances: values written
// directly to instances (as a split of concurrent Records would leave
// them) decide it, and with no value on a majority Record is
// ErrUnavailable.
func TestRecordMajority(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := testPrefix()
	d := recordDriver(t, prefix)
	admin := adminClients(t, hostsOf(t, endpoint(t)))
	if len(admin) != 5 {
		t.Fatalf("%d instances; this test wants 5", len(admin))
	}
	set := func(key string, vals ...string) {
		for i, v := range vals {
			if v == "" {
				continue
			}
			if err := admin[i].Set(ctx, prefix+"c:"+key, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A on 2, B on 2, the fifth empty: C goes there, no majority.
	set("split", "A", "A", "B", "B", "")
	if v, err := d.Record(ctx, "split", "C"); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Record over a 2-2 split: %q, %v; want ErrUnavailable", v, err)
	}
	if v := admin[4].Get(ctx, prefix+"c:split").Val(); v != "C" {
		t.Fatalf("the empty instance holds %q; want C", v)
	}
	if v, err := d.Record(ctx, "split", "A"); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Record again over a 2-2-1 split: %q, %v; want ErrUnavailable", v, err)
	}
	// Clearing one side frees its instances: B takes them and has four.
	mustClear(ctx, t, d, "split", "A", true)
	mustRecord(ctx, t, d, "split", "B", "B")
	mustRecord(ctx, t, d, "split", "D", "B")

	// A on 3 of 5: A is the record, whatever the other two hold.
	set("three", "B", "A", "A", "C", "A")
	mustRecord(ctx, t, d, "three", "E", "A")
	// Clearing A leaves B and C, each on one instance: E takes the rest.
	mustClear(ctx, t, d, "three", "A", true)
	mustRecord(ctx, t, d, "three", "E", "E")
	mustClear(ctx, t, d, "three", "B", true)
	mustClear(ctx, t, d, "three", "B", false)
}

// With 2 of 5 masters down, records are still written, read and cleared
// by the other three; with 3 down, Record and ClearRecord fail with
// ErrUnavailable.
func TestRecordTwoOfFiveDown(t *testing.T) {
	m := privateMasters(t)
	_, d := m.locker(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mustRecord(ctx, t, d, "before", "a", "a")
	m.down(t, 0, 3)
	mustRecord(ctx, t, d, "before", "b", "a")
	mustRecord(ctx, t, d, "k", "permits=3", "permits=3")
	mustRecord(ctx, t, d, "k", "permits=4", "permits=3")
	_, d2 := m.locker(t)
	mustRecord(ctx, t, d2, "k", "permits=5", "permits=3")
	mustClear(ctx, t, d, "k", "permits=4", false)
	mustClear(ctx, t, d, "k", "permits=3", true)
	mustRecord(ctx, t, d, "k", "permits=6", "permits=6")

	m.down(t, 1)
	if v, err := d.Record(ctx, "before", "c"); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Record with 3 of 5 down: %q, %v; want ErrUnavailable", v, err)
	}
	if ok, err := d.ClearRecord(ctx, "k", "permits=6"); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("ClearRecord with 3 of 5 down: %v, %v; want ErrUnavailable", ok, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the calls took until the context ended")
	}
}
