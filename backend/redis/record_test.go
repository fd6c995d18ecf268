package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// recordPrefix is a key prefix of this test run alone: records never
// expire, so each test starts from none.
func recordPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return testPrefix + "-rec-" + hex.EncodeToString(b[:])
}

// recordDriver opens a driver on endpoint under prefix, closed when the
// test ends.
func recordDriver(ctx context.Context, t *testing.T, endpoint, prefix string, kv ...string) *redisDriver {
	t.Helper()
	u, err := url.Parse(withParams(t, endpoint, append([]string{"prefix", prefix}, kv...)...))
	if err != nil {
		t.Fatal(err)
	}
	d, err := openDriver(ctx, u, newClient)
	if err != nil {
		t.Fatalf("open %s: %v", u, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
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

// The first value wins and is returned to every later caller; it is kept
// without expiry under the key's hash tag; another prefix has its own.
func TestRecordFirstValueWins(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prefix := recordPrefix()
		d := recordDriver(ctx, t, endpoint, prefix)
		other := recordDriver(ctx, t, endpoint, prefix)
		mustRecord(ctx, t, d, "sem", "permits=3", "permits=3")
		mustRecord(ctx, t, d, "sem", "permits=5", "permits=3")
		mustRecord(ctx, t, other, "sem", "permits=5", "permits=3")

		admin := adminClient(t, withParams(t, endpoint, "prefix", prefix))
		n := keyNames(prefix, "sem")
		if hashTag(n.record) != hashTag(n.lock) {
			t.Fatalf("record %q is not in the lock's slot (%q)", n.record, n.lock)
		}
		if v := admin.Get(ctx, n.record).Val(); v != "permits=3" {
			t.Fatalf("record key %q holds %q; want permits=3", n.record, v)
		}
		if ttl := admin.PTTL(ctx, n.record).Val(); ttl != -1 {
			t.Fatalf("record PTTL %v; want none (-1)", ttl)
		}

		apart := recordDriver(ctx, t, endpoint, prefix+"-other")
		mustRecord(ctx, t, apart, "sem", "permits=5", "permits=5")
		mustRecord(ctx, t, d, "sem", "permits=7", "permits=3")
	})
}

// Concurrent Records with different values, from separate drivers (each
// with its own connections), all return the same value, the one stored.
func TestRecordRace(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		prefix := recordPrefix()
		const n = 6
		ds := make([]*redisDriver, n)
		for i := range ds {
			ds[i] = recordDriver(ctx, t, endpoint, prefix)
		}
		admin := adminClient(t, withParams(t, endpoint, "prefix", prefix))
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
			stored := admin.Get(ctx, keyNames(prefix, key).record).Val()
			for i := range got {
				if errs[i] != nil || got[i] != stored {
					t.Fatalf("round %d: caller %d got %q, %v; stored %q", round, i, got[i], errs[i], stored)
				}
			}
			if !strings.HasPrefix(stored, "permits=") {
				t.Fatalf("round %d: stored %q", round, stored)
			}
		}
	})
}

// ClearRecord deletes only the value it is given; afterwards a new value
// can be recorded.
func TestClearRecord(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prefix := recordPrefix()
		d := recordDriver(ctx, t, endpoint, prefix)
		admin := adminClient(t, withParams(t, endpoint, "prefix", prefix))
		rec := keyNames(prefix, "sem").record

		mustClear(ctx, t, d, "sem", "permits=3", false) // nothing there
		mustRecord(ctx, t, d, "sem", "permits=3", "permits=3")
		mustClear(ctx, t, d, "sem", "permits=4", false)
		if v := admin.Get(ctx, rec).Val(); v != "permits=3" {
			t.Fatalf("a wrong ClearRecord left %q; want permits=3", v)
		}
		mustClear(ctx, t, d, "sem", "permits=3", true)
		if n := admin.Exists(ctx, rec).Val(); n != 0 {
			t.Fatal("record still there after ClearRecord")
		}
		mustClear(ctx, t, d, "sem", "permits=3", false)
		mustRecord(ctx, t, d, "sem", "permits=9", "permits=9")
	})
}

// Lock, Unlock, Break and expiry of the same key leave its record alone,
// a record does not stop the key from being locked, and Inspect does not
// see it.
func TestRecordApartFromLock(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prefix := recordPrefix()
		d := recordDriver(ctx, t, endpoint, prefix)
		l, err := dlock.NewLocker(recordDriver(ctx, t, endpoint, prefix), dlock.WithTTL(5*time.Second))
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

		if _, err := d.TryAcquire(ctx, driver.Request{Key: key, TTL: 100 * time.Millisecond, Owner: "0123456789abcdef0123456789abcdef"}); err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		time.Sleep(250 * time.Millisecond) // the lease runs out
		if info, err := d.Inspect(ctx, key); err != nil || info.Held {
			t.Fatalf("Inspect after expiry: %+v, %v; want free", info, err)
		}
		mustRecord(ctx, t, d, key, "permits=8", val)
	})
}

// Keys with odd bytes have records of their own, apart from each other's;
// the same keys lock as well with a record on them.
func TestRecordOddKeys(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prefix := recordPrefix()
		d := recordDriver(ctx, t, endpoint, prefix)
		keys := []string{"a/b", "..", "", "ключ", "{", "}", "{}", "a{b}c", "%7B", "\x00nul", "x:lock", strings.Repeat("k", driver.MaxKeyLen)}
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
	})
}

// A cancelled context and a closed driver are errors, and change nothing.
func TestRecordCancelledAndClosed(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prefix := recordPrefix()
		d := recordDriver(ctx, t, endpoint, prefix)
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
	})
}

// A record key holding something else is ErrNotALock, left as it is.
func TestRecordNotARecord(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		prefix := recordPrefix()
		d := recordDriver(ctx, t, endpoint, prefix)
		admin := adminClient(t, withParams(t, endpoint, "prefix", prefix))
		rec := keyNames(prefix, "k").record
		if err := admin.HSet(ctx, rec, "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, ErrNotALock) {
			t.Fatalf("Record over a hash: %v; want ErrNotALock", err)
		}
		if _, err := d.ClearRecord(ctx, "k", "v"); !errors.Is(err, ErrNotALock) {
			t.Fatalf("ClearRecord over a hash: %v; want ErrNotALock", err)
		}
		if typ := admin.Type(ctx, rec).Val(); typ != "hash" {
			t.Fatalf("the hash became a %s", typ)
		}
	})
}

// A server that went away is ErrUnavailable, promptly; a server restarted
// without persistence has lost the record (as doc.go says), and the next
// Record writes its own value.
func TestRecordServerDown(t *testing.T) {
	s := startTempServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := recordDriver(ctx, t, s.url(), recordPrefix(), "dial_timeout", "200ms", "max_retries", "0")
	mustRecord(ctx, t, d, "k", "a", "a")
	s.stop()
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	defer ccancel()
	if _, err := d.Record(cctx, "k", "b"); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Record with the server down: %v; want ErrUnavailable", err)
	}
	if _, err := d.ClearRecord(cctx, "k", "a"); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("ClearRecord with the server down: %v; want ErrUnavailable", err)
	}
	if cctx.Err() != nil {
		t.Fatal("the calls took until the context ended")
	}
	s.start()
	mustRecord(ctx, t, d, "k", "b", "b")
}

// With wait_replicas, a Record is on the replica when it returns; when too
// few replicas confirm, it is an ErrReplicas error and the record stays.
func TestRecordWaitReplicas(t *testing.T) {
	primary, replica := startReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := recordPrefix()
	rc := replica.client()
	d := recordDriver(ctx, t, primary.url(), prefix, "wait_replicas", "1", "wait_timeout", "1s")
	mustRecord(ctx, t, d, "k", "a", "a")
	if v := rc.Get(ctx, keyNames(prefix, "k").record).Val(); v != "a" {
		t.Fatalf("replica has %q when Record returned; want a", v)
	}
	d2 := recordDriver(ctx, t, primary.url(), prefix, "wait_replicas", "2", "wait_timeout", "100ms")
	_, err := d2.Record(ctx, "k2", "b")
	if !errors.Is(err, ErrReplicas) || !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("Record with too few replicas: %v; want ErrReplicas and ErrUnavailable", err)
	}
	mustRecord(ctx, t, d, "k2", "c", "b")
}
