package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
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

// The first value wins, on every instance, without expiry; another prefix
// has its own.
func TestRecordFirstValueWins(t *testing.T) {
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

// Concurrent Records with different values from separate drivers either
// all return the same value, or fail with ErrUnavailable (a split with no
// majority); a value returned is on a majority of instances.
func TestRecordRace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := testPrefix()
	const n = 6
	ds := make([]*redlock.Driver, n)
	for i := range ds {
		ds[i] = recordDriver(t, prefix)
	}
	admin := adminClients(t, hostsOf(t, endpoint(t)))
	agreed := 0
	for round := range 10 {
		key := fmt.Sprintf("race/%d", round)
		got := make([]string, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, d := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = d.Record(ctx, key, fmt.Sprintf("permits=%d", i+1))
			}()
		}
		close(start)
		wg.Wait()
		won := ""
		for i := range got {
			switch {
			case errs[i] != nil:
				if !errors.Is(errs[i], driver.ErrUnavailable) {
					t.Fatalf("round %d: caller %d: %v; want a value or ErrUnavailable", round, i, errs[i])
				}
			case won == "":
				won = got[i]
			case got[i] != won:
				t.Fatalf("round %d: callers got %q and %q", round, won, got[i])
			}
		}
		if won == "" {
			t.Logf("round %d: split with no majority", round)
			continue
		}
		agreed++
		on := 0
		for _, c := range admin {
			if c.Get(ctx, prefix+"c:"+key).Val() == won {
				on++
			}
		}
		if on < ds[0].Quorum() {
			t.Fatalf("round %d: %q returned but on %d instances only", round, won, on)
		}
	}
	if agreed == 0 {
		t.Fatal("no round reached a majority")
	}
}

// ClearRecord deletes only the value it is given, on every instance;
// afterwards a new value can be recorded.
func TestClearRecord(t *testing.T) {
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

// Lock, Unlock, Break and expiry leave the record alone, a record does not
// stop the key from being locked, and Inspect does not see it.
func TestRecordApartFromLock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := testPrefix()
	d := recordDriver(t, prefix)
	l, err := dlock.NewLocker(recordDriver(t, prefix), dlock.WithTTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	const key, val = "sem", "permits=2"
	mustRecord(ctx, t, d, key, val, val)
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect with only a record: %+v, %v; want free", info, err)
	}
	m, _ := l.NewMutex(key)
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock of a key with a record: %v", err)
	}
	mustRecord(ctx, t, d, key, "permits=8", val)
	if info, err := d.Inspect(ctx, key); err != nil || !info.Held {
		t.Fatalf("Inspect while locked: %+v, %v; want held", info, err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mustRecord(ctx, t, d, key, "permits=8", val)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Break(ctx, key); err != nil {
		t.Fatalf("Break: %v", err)
	}
	mustRecord(ctx, t, d, key, "permits=8", val)
	if _, err := d.TryAcquire(ctx, driver.Request{Key: key, TTL: 200 * time.Millisecond, Owner: "0123456789abcdef0123456789abcdef"}); err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	time.Sleep(400 * time.Millisecond) // the lease runs out
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect after expiry: %+v, %v; want free", info, err)
	}
	mustRecord(ctx, t, d, key, "permits=8", val)
}

// Keys with odd bytes have records of their own, apart from each other's
// and from locks whose names look like them.
func TestRecordOddKeys(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := recordDriver(t, testPrefix())
	keys := []string{"a/b", "..", "", "ключ", "{", "}", "\x00nul", "l:x", "c:x", strings.Repeat("k", driver.MaxKeyLen)}
	for i, k := range keys {
		mustRecord(ctx, t, d, k, fmt.Sprintf("v%d", i), fmt.Sprintf("v%d", i))
	}
	for i, k := range keys {
		mustRecord(ctx, t, d, k, "other", fmt.Sprintf("v%d", i))
		if k == "" {
			continue // the portable layer refuses an empty lock key
		}
		h, err := d.TryAcquire(ctx, driver.Request{Key: k, TTL: 5 * time.Second, Owner: "0123456789abcdef0123456789abcdef"})
		if err != nil {
			t.Fatalf("TryAcquire(%q) with a record: %v", k, err)
		}
		if err := d.Release(ctx, h); err != nil {
			t.Fatalf("Release(%q): %v", k, err)
		}
		mustRecord(ctx, t, d, k, "other", fmt.Sprintf("v%d", i))
	}
	for i, k := range keys {
		mustClear(ctx, t, d, k, fmt.Sprintf("v%d", i), true)
	}
}

// A cancelled context and a closed driver are errors.
func TestRecordCancelledAndClosed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := recordDriver(t, testPrefix())
	dead, stop := context.WithCancel(ctx)
	stop()
	if _, err := d.Record(dead, "k", "v"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := d.ClearRecord(dead, "k", "v"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ClearRecord with a cancelled context: %v; want context.Canceled", err)
	}
	mustRecord(ctx, t, d, "k", "w", "w")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Record after Close: %v; want ErrClosed", err)
	}
	if _, err := d.ClearRecord(ctx, "k", "w"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("ClearRecord after Close: %v; want ErrClosed", err)
	}
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
