package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// recEnv is one topology, a prefix unique to the test and an admin client
// of its own.
type recEnv struct {
	cfg    clientv3.Config
	prefix string
	admin  *clientv3.Client
}

// recordTopologies are the etcd deployments the record tests run on.
var recordTopologies = []struct{ name, envVar string }{
	{"single", "DLOCK_ETCD_URL"},
	{"cluster3", "DLOCK_ETCD3_URL"},
}

// eachRecordTopology runs fn on the single member and on the 3-member
// cluster.
func eachRecordTopology(t *testing.T, fn func(t *testing.T, e *recEnv)) {
	for _, tp := range recordTopologies {
		t.Run(tp.name, func(t *testing.T) { fn(t, newRecEnv(t, tp.envVar)) })
	}
}

func newRecEnv(t *testing.T, envVar string) *recEnv {
	t.Helper()
	u, err := url.Parse(testenv.Endpoint(t, envVar))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &recEnv{cfg: cfg, prefix: "dlock-test/" + owner()[:12] + "/", admin: admin}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Delete(ctx, e.prefix, clientv3.WithPrefix())
		_ = admin.Close()
	})
	return e
}

// driver returns a driver with a client of its own (as a separate process
// would have) under prefix, closed when the test ends.
func (e *recEnv) driver(t *testing.T, prefix string) *drv {
	t.Helper()
	cli, err := clientv3.New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(cli, Config{Prefix: prefix}, true)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustRecord(t *testing.T, d *drv, key, value, want string) {
	t.Helper()
	got, err := d.Record(ctxFor(t, 30*time.Second), key, value)
	if err != nil {
		t.Fatalf("Record(%.40q, %q): %v", key, value, err)
	}
	if got != want {
		t.Fatalf("Record(%.40q, %q) = %q; want %q", key, value, got, want)
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The first value wins, for the driver that wrote it and for any other;
// the record is a plain key under the Locker's prefix, without a lease.
func TestRecordFirstWins(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		d1, d2 := e.driver(t, e.prefix), e.driver(t, e.prefix)
		mustRecord(t, d1, "sem", "permits=3", "permits=3")
		mustRecord(t, d1, "sem", "permits=5", "permits=3")
		mustRecord(t, d2, "sem", "permits=7", "permits=3")
		resp, err := e.admin.Get(ctxFor(t, 10*time.Second), e.prefix+recordDir+"sem")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "permits=3" || resp.Kvs[0].Lease != 0 {
			t.Fatalf("record in etcd: %v; want permits=3 without a lease", resp.Kvs)
		}
		// Another prefix is another namespace.
		other := e.driver(t, e.prefix+"other")
		mustRecord(t, other, "sem", "permits=9", "permits=9")
		mustRecord(t, d2, "sem", "permits=9", "permits=3")
	})
}

// Concurrent Record calls with different values from separate clients all
// return one of them, the one etcd holds.
func TestRecordRace(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		const n = 8
		ds := make([]*drv, n)
		for i := range ds {
			ds[i] = e.driver(t, e.prefix)
		}
		for round := 0; round < 5; round++ {
			key := fmt.Sprintf("race-%d", round)
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
	})
}

// ClearRecord deletes only a record with the given value.
func TestClearRecord(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		d := e.driver(t, e.prefix)
		ctx := ctxFor(t, 30*time.Second)
		if ok, err := d.ClearRecord(ctx, "c", "permits=1"); err != nil || ok {
			t.Fatalf("ClearRecord of no record = %v, %v; want false, nil", ok, err)
		}
		mustRecord(t, d, "c", "permits=1", "permits=1")
		if ok, err := d.ClearRecord(ctx, "c", "permits=2"); err != nil || ok {
			t.Fatalf("ClearRecord with another value = %v, %v; want false, nil", ok, err)
		}
		mustRecord(t, d, "c", "permits=2", "permits=1")
		if ok, err := d.ClearRecord(ctx, "c", "permits=1"); err != nil || !ok {
			t.Fatalf("ClearRecord with the value = %v, %v; want true, nil", ok, err)
		}
		if ok, err := d.ClearRecord(ctx, "c", "permits=1"); err != nil || ok {
			t.Fatalf("second ClearRecord = %v, %v; want false, nil", ok, err)
		}
		mustRecord(t, d, "c", "permits=2", "permits=2")
	})
}

// A lock on the record's key (and a lock whose escaped name looks like the
// records' part of the prefix) leaves the record alone through acquire,
// release, Break and expiry; Inspect never sees the record; clearing a
// record does not end a hold.
func TestRecordApartFromLock(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		d := e.driver(t, e.prefix)
		ctx := ctxFor(t, time.Minute)
		for _, key := range []string{"k", "%records", "%records/k"} {
			mustRecord(t, d, key, "permits=2", "permits=2")
			free := func(when string) {
				t.Helper()
				info, err := d.Inspect(ctx, key)
				if err != nil {
					t.Fatalf("Inspect %s: %v", when, err)
				}
				if info.Held || info.Waiters != 0 {
					t.Fatalf("Inspect(%q) %s = %+v; want free, no waiters", key, when, info)
				}
				mustRecord(t, d, key, "permits=3", "permits=2")
			}
			free("with only a record")
			req := driver.Request{Key: key, TTL: MinTTL, Owner: owner()}
			h, err := d.TryAcquire(ctx, req)
			if err != nil {
				t.Fatalf("TryAcquire(%q) with a record: %v", key, err)
			}
			if info, err := d.Inspect(ctx, key); err != nil || !info.Held || info.Waiters != 0 {
				t.Fatalf("Inspect of the held key = %+v, %v; want held, no waiters", info, err)
			}
			if err := d.Release(ctx, h); err != nil {
				t.Fatalf("Release: %v", err)
			}
			free("after Release")

			req.Owner = owner()
			if _, err = d.TryAcquire(ctx, req); err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			if info, err := d.Break(ctx, key); err != nil || !info.Held {
				t.Fatalf("Break = %+v, %v; want the hold broken", info, err)
			}
			free("after Break")

			// A record cleared and written again while the key is held
			// does not end the hold.
			req.Owner = owner()
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
			if info, err := d.Inspect(ctx, key); err != nil || !info.Held {
				t.Fatalf("Inspect after the record was cleared = %+v, %v; want held", info, err)
			}
			// Not renewed again: the lease expires and the entry with it.
			deadline := time.Now().Add(30 * time.Second)
			for {
				info, err := d.Inspect(ctx, key)
				if err != nil {
					t.Fatalf("Inspect: %v", err)
				}
				if !info.Held {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("hold not expired 30s after its last renewal")
				}
				time.Sleep(200 * time.Millisecond)
			}
			free("after expiry")
			if resp, err := e.admin.Get(ctx, d.queue(key), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
				t.Fatalf("queue of %q after expiry: %v, %v; want empty", key, resp, err)
			}
		}
	})
}

// Keys of any bytes, up to MaxKeyLen, have records of their own.
func TestRecordOddKeys(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		d := e.driver(t, e.prefix)
		keys := []string{"a", "a/b", "a%2Fb", "..", ".", "", "/", "ключ🔒", "\x00\xff", "%records",
			strings.Repeat("\xff", driver.MaxKeyLen), strings.Repeat("/", driver.MaxKeyLen)}
		for i, k := range keys {
			mustRecord(t, d, k, fmt.Sprintf("v%d", i), fmt.Sprintf("v%d", i))
		}
		for i, k := range keys {
			mustRecord(t, d, k, "other", fmt.Sprintf("v%d", i))
		}
		long := strings.Repeat("é", driver.MaxRecordLen/2)
		mustRecord(t, d, "long-value", long, long)
		for i, k := range keys {
			if ok, err := d.ClearRecord(ctxFor(t, 10*time.Second), k, fmt.Sprintf("v%d", i)); err != nil || !ok {
				t.Fatalf("ClearRecord(%.40q) = %v, %v; want true", k, ok, err)
			}
		}
	})
}

// A cancelled context and a closed driver give errors, not a record.
func TestRecordContextAndClose(t *testing.T) {
	eachRecordTopology(t, func(t *testing.T, e *recEnv) {
		d := e.driver(t, e.prefix)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := d.Record(ctx, "x", "permits=1"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Record with a cancelled context: %v; want context.Canceled", err)
		}
		if _, err := d.ClearRecord(ctx, "x", "permits=1"); !errors.Is(err, context.Canceled) {
			t.Fatalf("ClearRecord with a cancelled context: %v; want context.Canceled", err)
		}
		mustRecord(t, d, "x", "permits=2", "permits=2")
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Record(ctxFor(t, 10*time.Second), "x", "permits=1"); !errors.Is(err, driver.ErrClosed) {
			t.Fatalf("Record after Close: %v; want ErrClosed", err)
		}
		if _, err := d.ClearRecord(ctxFor(t, 10*time.Second), "x", "permits=2"); !errors.Is(err, driver.ErrClosed) {
			t.Fatalf("ClearRecord after Close: %v; want ErrClosed", err)
		}
	})
}

// A record written before a leader change is the record after it (on the
// 3-member cluster: leadership moved to a follower).
func TestRecordLeaderChange(t *testing.T) {
	e := newRecEnv(t, "DLOCK_ETCD3_URL")
	if len(e.cfg.Endpoints) < 3 {
		t.Fatalf("DLOCK_ETCD3_URL has %d members; want 3", len(e.cfg.Endpoints))
	}
	mustRecord(t, e.driver(t, e.prefix), "lc", "permits=4", "permits=4")
	ctx := ctxFor(t, time.Minute)
	leaderEP, leaderID, other := "", uint64(0), uint64(0)
	for _, ep := range e.cfg.Endpoints {
		st, err := e.admin.Status(ctx, ep)
		if err != nil {
			t.Fatalf("Status(%s): %v", ep, err)
		}
		if st.Header.MemberId == st.Leader {
			leaderEP, leaderID = ep, st.Leader
		} else {
			other = st.Header.MemberId
		}
	}
	if leaderEP == "" || other == 0 {
		t.Fatal("no leader and follower found")
	}
	cfg := e.cfg
	cfg.Endpoints = []string{leaderEP}
	lc, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	if _, err := lc.MoveLeader(ctx, other); err != nil {
		t.Fatalf("MoveLeader: %v", err)
	}
	for {
		st, err := e.admin.Status(ctx, leaderEP)
		if err == nil && st.Leader != 0 && st.Leader != leaderID {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("leadership did not move")
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := e.driver(t, e.prefix)
	mustRecord(t, d, "lc", "permits=5", "permits=4")
	if ok, err := d.ClearRecord(ctx, "lc", "permits=4"); err != nil || !ok {
		t.Fatalf("ClearRecord after the leader change = %v, %v; want true", ok, err)
	}
}
