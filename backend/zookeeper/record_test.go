package zookeeper

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

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
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

func TestRecordFirstWins(t *testing.T) {
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

func TestRecordRace(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		ctx := testenv.Context(t, 2*time.Minute)
		const n = 6
		ds := make([]*zkDriver, n)
		for i := range ds {
			ds[i] = e.driver(t)
		}
		for round := 0; round < 10; round++ {
			key := fmt.Sprintf("race-%d", round)
			// Half the rounds race over a cleared record.
			if round%2 == 1 {
				if _, err := ds[0].Record(ctx, key, "old"); err != nil {
					t.Fatal(err)
				}
				if ok, err := ds[0].ClearRecord(ctx, key, "old"); !ok || err != nil {
					t.Fatalf("ClearRecord = %v, %v", ok, err)
				}
			}
			got := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range ds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					got[i], errs[i] = ds[i].Record(ctx, key, fmt.Sprintf("permits=%d", i+1))
				}()
			}
			close(start)
			wg.Wait()
			for i := range got {
				if errs[i] != nil {
					t.Fatalf("round %d caller %d: %v", round, i, errs[i])
				}
				if got[i] != got[0] {
					t.Fatalf("round %d: callers got %q; want one value for all", round, got)
				}
			}
		}
	})
}

// Concurrent clears of one value and records of another: a clear empties
// only the value it read, never one recorded after its read.
func TestClearRecordRace(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		ctx := testenv.Context(t, 2*time.Minute)
		ds := []*zkDriver{e.driver(t), e.driver(t), e.driver(t)}
		for round := 0; round < 10; round++ {
			key := fmt.Sprintf("k%d", round)
			if _, err := ds[0].Record(ctx, key, "a"); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var cleared [2]bool
			var errs [3]error
			var recorded string
			for i := 0; i < 2; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cleared[i], errs[i] = ds[i].ClearRecord(ctx, key, "a")
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					v, err := ds[2].Record(ctx, key, "b")
					if err != nil || v == "b" {
						recorded, errs[2] = v, err
						return
					}
				}
			}()
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if cleared[0] == cleared[1] {
				t.Fatalf("round %d: clears reported %v; want exactly one", round, cleared)
			}
			if v, err := ds[0].Record(ctx, key, "c"); err != nil || v != recorded {
				t.Fatalf("round %d: record after the race = %q, %v; want %q, untouched by the clears", round, v, err, recorded)
			}
		}
	})
}

func TestClearRecord(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		d := e.driver(t)
		ctx := testenv.Context(t, time.Minute)
		if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); ok || err != nil {
			t.Fatalf("ClearRecord of no record = %v, %v; want false, nil", ok, err)
		}
		if _, err := d.Record(ctx, "sem", "permits=3"); err != nil {
			t.Fatal(err)
		}
		if ok, err := d.ClearRecord(ctx, "sem", "permits=4"); ok || err != nil {
			t.Fatalf("ClearRecord with a wrong value = %v, %v; want false, nil", ok, err)
		}
		if v, err := d.Record(ctx, "sem", "permits=9"); err != nil || v != "permits=3" {
			t.Fatalf("after a wrong clear Record = %q, %v; want permits=3 kept", v, err)
		}
		if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); !ok || err != nil {
			t.Fatalf("ClearRecord with the value = %v, %v; want true, nil", ok, err)
		}
		if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); ok || err != nil {
			t.Fatalf("second ClearRecord = %v, %v; want false, nil", ok, err)
		}
		if v, err := d.Record(ctx, "sem", "permits=9"); err != nil || v != "permits=9" {
			t.Fatalf("Record after the clear = %q, %v; want the new value permits=9", v, err)
		}
	})
}

func TestRecordApartFromLock(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		d := e.driver(t)
		ctx := testenv.Context(t, time.Minute)
		const key = "sem"
		if _, err := d.Record(ctx, key, "permits=2"); err != nil {
			t.Fatal(err)
		}
		if info, err := d.Inspect(ctx, key); err != nil || info.Held {
			t.Fatalf("Inspect of a recorded key = %+v, %v; want free", info, err)
		}
		req := driver.Request{Key: key, TTL: d.sessionTimeout(), Owner: recOwner()}
		h, err := d.TryAcquire(ctx, req)
		if err != nil {
			t.Fatalf("TryAcquire of a recorded key: %v", err)
		}
		if err := d.Release(ctx, h); err != nil {
			t.Fatal(err)
		}
		req.Owner = recOwner()
		if _, err := d.TryAcquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		if info, err := d.Break(ctx, key); err != nil || !info.Held {
			t.Fatalf("Break = %+v, %v", info, err)
		}
		// A holder whose session ends (its lease's end on ZooKeeper).
		d2 := e.driver(t)
		req.Owner = recOwner()
		if _, err := d2.TryAcquire(ctx, req); err != nil {
			t.Fatal(err)
		}
		_ = d2.Close()
		if info, err := d.Inspect(ctx, key); err != nil || info.Held {
			t.Fatalf("Inspect after the holder's session ended = %+v, %v; want free", info, err)
		}
		// A key whose escaped name would be the records node's, if '.'
		// were not escaped.
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
		if v, err := d.Record(ctx, key, "permits=5"); err != nil || v != "permits=2" {
			t.Fatalf("Record after lock, unlock, break and session end = %q, %v; want permits=2", v, err)
		}
	})
}

func TestRecordKeys(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		d := e.driver(t)
		ctx := testenv.Context(t, time.Minute)
		keys := []string{"a/b", "..", ".", recordsNode, "ключ", "\x00\xff", strings.Repeat("k", driver.MaxKeyLen), strings.Repeat("/", driver.MaxKeyLen)}
		for i, k := range keys {
			v := fmt.Sprintf("permits=%d", i)
			if got, err := d.Record(ctx, k, v); err != nil || got != v {
				t.Fatalf("Record(%.20q) = %q, %v; want %q", k, got, err, v)
			}
		}
		for i, k := range keys {
			v := fmt.Sprintf("permits=%d", i)
			if got, err := d.Record(ctx, k, "other"); err != nil || got != v {
				t.Fatalf("second Record(%.20q) = %q, %v; want %q", k, got, err, v)
			}
		}
		for _, k := range []string{"", strings.Repeat("k", driver.MaxKeyLen+1)} {
			if _, err := d.Record(ctx, k, "v"); !errors.Is(err, dlock.ErrInvalidKey) {
				t.Errorf("Record of a %d-byte key: %v; want ErrInvalidKey", len(k), err)
			}
			if _, err := d.ClearRecord(ctx, k, "v"); !errors.Is(err, dlock.ErrInvalidKey) {
				t.Errorf("ClearRecord of a %d-byte key: %v; want ErrInvalidKey", len(k), err)
			}
		}
		for _, v := range []string{"", "\xff", strings.Repeat("v", driver.MaxRecordLen+1)} {
			if _, err := d.Record(ctx, "k", v); !errors.Is(err, dlock.ErrInvalidOption) {
				t.Errorf("Record of value %.10q: %v; want ErrInvalidOption", v, err)
			}
		}
	})
}

func TestRecordContextAndClose(t *testing.T) {
	eachTopology(t, func(t *testing.T, env string) {
		e := newRecordEnv(t, env)
		d := e.driver(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, context.Canceled) {
			t.Errorf("Record on a cancelled context: %v", err)
		}
		if _, err := d.ClearRecord(ctx, "k", "v"); !errors.Is(err, context.Canceled) {
			t.Errorf("ClearRecord on a cancelled context: %v", err)
		}
		d.Close()
		if _, err := d.Record(context.Background(), "k", "v"); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("Record after Close: %v", err)
		}
		if _, err := d.ClearRecord(context.Background(), "k", "v"); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("ClearRecord after Close: %v", err)
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
