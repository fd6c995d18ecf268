package zookeeper

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// eachTopology runs f on the single server and on the 3-node ensemble.
func eachTopology(t *testing.T, f func(t *testing.T, env string)) {
	t.Run("standalone", func(t *testing.T) { f(t, "DLOCK_ZK_URL") })
	t.Run("ensemble", func(t *testing.T) { f(t, "DLOCK_ZK3_URL") })
}

// recordEnv is a prefix of its own under testPrefix, so that records,
// which outlive every session, do not carry over between test runs; the
// prefix is deleted when the test ends.
type recordEnv struct {
	raw    string // URL with the prefix
	prefix string
	adm    *zk.Conn
}

func newRecordEnv(t *testing.T, env string) *recordEnv {
	t.Helper()
	raw := endpoint(t, env, "session_timeout="+sessionTimeout.String())
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	e := &recordEnv{prefix: testPrefix + "/" + testenv.Unique(t, "rec"), adm: admin(t, raw)}
	u.Path = e.prefix
	e.raw = u.String()
	t.Cleanup(func() { deleteTree(e.adm, e.prefix) })
	return e
}

func deleteTree(c *zk.Conn, path string) {
	children, _, err := c.Children(path)
	if err != nil {
		return
	}
	for _, ch := range children {
		deleteTree(c, path+"/"+ch)
	}
	_ = c.Delete(path, -1)
}

// driver opens a driver on raw, closed when t ends.
func (e *recordEnv) driverAt(t *testing.T, raw string) *zkDriver {
	t.Helper()
	d, err := openDriver(testenv.Context(t, 30*time.Second), raw)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *recordEnv) driver(t *testing.T) *zkDriver { return e.driverAt(t, e.raw) }

func recOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// The record is a persistent znode under the Locker's records node, apart
// from the key's lock znode.
func TestRecordLayout(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		d := e.driver(t)
		ctx := testenv.Context(t, time.Minute)
		if v, err := d.Record(ctx, "sem", "permits=3"); err != nil || v != "permits=3" {
			t.Fatalf("first Record = %q, %v; want permits=3", v, err)
		}
		if v, err := d.Record(ctx, "sem", "permits=5"); err != nil || v != "permits=3" {
			t.Fatalf("second Record = %q, %v; want the first value permits=3", v, err)
		}
		if v, err := e.driver(t).Record(ctx, "sem", "permits=7"); err != nil || v != "permits=3" {
			t.Fatalf("Record from another driver = %q, %v; want permits=3", v, err)
		}
		// The record lives under the Locker's prefix, apart from the keys.
		data, st, err := e.adm.Get(e.prefix + "/" + recordsNode + "/sem")
		if err != nil || string(data) != "permits=3" || st.EphemeralOwner != 0 {
			t.Fatalf("record znode: %q, %+v, %v; want persistent permits=3", data, st, err)
		}
		if ok, _, _ := e.adm.Exists(e.prefix + "/sem"); ok {
			t.Fatalf("a Record made the key's lock znode")
		}
	})
}

// Each server of the topology answers with the value recorded through
// another: a follower's view is synced first.
func TestRecordEveryServer(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		ctx := testenv.Context(t, time.Minute)
		u, _ := url.Parse(e.raw)
		var ds []*zkDriver
		for _, h := range hosts(t, e.raw) {
			v := *u
			v.Host = h
			ds = append(ds, e.driverAt(t, v.String()))
		}
		for round := 0; round < 10; round++ {
			key := fmt.Sprintf("k%d", round)
			first := ds[round%len(ds)]
			if v, err := first.Record(ctx, key, "permits=1"); err != nil || v != "permits=1" {
				t.Fatalf("Record = %q, %v", v, err)
			}
			for i, d := range ds {
				if v, err := d.Record(ctx, key, fmt.Sprintf("permits=%d", i+2)); err != nil || v != "permits=1" {
					t.Fatalf("round %d: Record via server %d = %q, %v; want permits=1", round, i, v, err)
				}
			}
			if ok, err := ds[(round+1)%len(ds)].ClearRecord(ctx, key, "permits=1"); !ok || err != nil {
				t.Fatalf("ClearRecord via another server = %v, %v", ok, err)
			}
			for i, d := range ds {
				if ok, err := d.ClearRecord(ctx, key, "permits=1"); ok || err != nil {
					t.Fatalf("round %d: ClearRecord of a cleared record via server %d = %v, %v; want false", round, i, ok, err)
				}
			}
		}
	})
}

// Keys whose escaped names would be the records node's, if '.' were not
// escaped, lock as any other key, and leave the records alone.
func TestRecordNodeKeys(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		d := e.driver(t)
		ctx := testenv.Context(t, time.Minute)
		if _, err := d.Record(ctx, "sem", "permits=2"); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{recordsNode, "." + recordsNode, "/" + recordsNode} {
			req := driver.Request{Key: k, TTL: d.sessionTimeout(), Owner: recOwner()}
			h, err := d.TryAcquire(ctx, req)
			if err != nil {
				t.Fatalf("TryAcquire(%q): %v", k, err)
			}
			if err := d.Release(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
		if v, err := d.Record(ctx, "sem", "permits=5"); err != nil || v != "permits=2" {
			t.Fatalf("Record after locking the records node's names = %q, %v; want permits=2", v, err)
		}
	})
}

// A server that stops answering is ErrUnavailable for both calls, before
// the caller's context ends.
func TestRecordUnavailable(t *testing.T) {
	e := newRecordEnv(t, "DLOCK_ZK_URL")
	p := newProxy(t, hosts(t, e.raw)[0])
	u, _ := url.Parse(e.raw)
	u.Host = p.addr()
	d := e.driverAt(t, u.String())
	ctx := testenv.Context(t, 2*time.Minute)
	if _, err := d.Record(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	p.block()
	defer p.unblock()
	if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Record with the server cut off: %v; want ErrUnavailable", err)
	}
	if _, err := d.ClearRecord(ctx, "k", "v"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("ClearRecord with the server cut off: %v; want ErrUnavailable", err)
	}
}
