package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

func testDriver(t *testing.T) *drv { return testDriverWith(t) }

// testDriverWith is testDriver on a client with opts added to its dial
// options.
func testDriverWith(t *testing.T, opts ...grpc.DialOption) *drv {
	t.Helper()
	u, err := url.Parse(testenv.Endpoint(t, "DLOCK_ETCD_URL"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialOptions = append(cfg.DialOptions, opts...)
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	d := newDriver(cli, Config{Prefix: "dlock-test/" + hex.EncodeToString(b[:])}, true)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = cli.Delete(ctx, d.prefix, clientv3.WithPrefix())
		_ = d.Close()
	})
	return d
}

func owner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// A stale or retried release never deletes a later hold, even one whose
// entry has the same name (entries are named after their lease, which is
// reused; etcd issue 22082 is this bug in concurrency.Mutex, whose entry
// name is the session's lease ID).
func TestStaleRelease(t *testing.T) {
	d := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := driver.Request{Key: "stale", TTL: 10 * time.Second, Owner: owner()}
	h1, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := d.Release(ctx, h1); err != nil {
		t.Fatalf("Release: %v", err)
	}
	req.Owner = owner()
	h2, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("second TryAcquire: %v", err)
	}
	if k1, k2 := h1.State.(*hold).key, h2.State.(*hold).key; k1 != k2 {
		t.Fatalf("the second hold's entry %q is not the first one's %q: this test needs the same name", k2, k1)
	}
	if err := d.Release(ctx, h1); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("stale Release: %v; want ErrNotHeld", err)
	}
	if _, err := d.TryAcquire(ctx, driver.Request{Key: "stale", TTL: 10 * time.Second, Owner: owner()}); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("TryAcquire after a stale Release: %v; want ErrNotAcquired (the second hold must survive)", err)
	}
	if _, err := d.Renew(ctx, h2); err != nil {
		t.Fatalf("Renew of the second hold: %v", err)
	}
	if err := d.Release(ctx, h2); err != nil {
		t.Fatalf("Release of the second hold: %v", err)
	}
}

// Released leases are reused while fresh, and a reused hold reports the
// lease's own clock (Since), not the time of the acquire.
func TestLeaseReuse(t *testing.T) {
	d := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := driver.Request{Key: "reuse", TTL: 3 * time.Second, Owner: owner()}
	h1, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := d.Release(ctx, h1); err != nil {
		t.Fatalf("Release: %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	req.Owner = owner()
	before := time.Now()
	h2, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer func() { _ = d.Release(ctx, h2) }()
	if h1.State.(*hold).lease() != h2.State.(*hold).lease() {
		t.Fatal("a fresh released lease was not reused")
	}
	if !h2.Since.Before(before) || h2.Since != h1.Since {
		t.Fatalf("reused hold: Since %v, first hold's %v, acquire sent at %v; want the lease's grant time", h2.Since, h1.Since, before)
	}
	// Once a lease is past a third of its TTL it is kept alive before reuse.
	if err := d.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
	time.Sleep(time.Second + 100*time.Millisecond)
	req.Owner = owner()
	before = time.Now()
	h3, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer func() { _ = d.Release(ctx, h3) }()
	if h3.Since.Before(before) {
		t.Fatalf("stale lease reused without a keepalive: Since %v before the acquire %v", h3.Since, before)
	}
}

// A waiter whose keepalives failed for a while (a leader election) gets its
// lease kept alive before it is granted the lock, so that the hold does not
// start with a validity window that is already over.
func TestRefreshBeforeGrant(t *testing.T) {
	d := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dh, err := d.TryAcquire(ctx, driver.Request{Key: "refresh", TTL: 4 * time.Second, Owner: owner()})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	defer func() { _ = d.Release(ctx, dh) }()
	h := dh.State.(*hold)
	h.lease().mu.Lock()
	h.lease().since = time.Now().Add(-3 * time.Second) // as if keepalives had failed
	h.lease().mu.Unlock()
	before := time.Now()
	if err := d.refresh(ctx, h); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if since, _ := h.lease().state(); since.Before(before) {
		t.Fatalf("refresh left the lease's last extension at %v, before %v", since, before)
	}
	// A lease that is gone makes the waiter's wait end as lost.
	if _, err := d.cli.Revoke(ctx, h.lease().id); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	h.lease().mu.Lock()
	h.lease().since = time.Now().Add(-3 * time.Second)
	h.lease().mu.Unlock()
	if err := d.refresh(ctx, h); !errors.Is(err, driver.ErrLockLost) {
		t.Fatalf("refresh of a revoked lease: %v; want ErrLockLost", err)
	}
}

// Watch, which callers that retry TryAcquire use, signals a release, and
// its channel closes when the watch is closed.
func TestWatchSignalsRelease(t *testing.T) {
	d := testDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dh, err := d.TryAcquire(ctx, driver.Request{Key: "watched", TTL: 10 * time.Second, Owner: owner()})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	w, err := d.Watch(ctx, "watched")
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if _, err := d.TryAcquire(ctx, driver.Request{Key: "watched", TTL: 10 * time.Second, Owner: owner()}); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key: %v; want ErrNotAcquired", err)
	}
	if err := d.Release(ctx, dh); err != nil {
		t.Fatalf("Release: %v", err)
	}
	select {
	case <-w.Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("no change signalled 10s after the release")
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range w.Changed() { // closed after Close
	}
}
