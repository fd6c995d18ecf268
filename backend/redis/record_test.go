package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

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

// The record is kept without expiry under the key's hash tag; another
// prefix has its own.
func TestRecordLayout(t *testing.T) {
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
