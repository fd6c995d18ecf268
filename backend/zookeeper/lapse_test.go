package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// lapseDrivers opens two drivers on the single server, closed when the
// test ends, and returns a key of the test's own.
func lapseDrivers(t *testing.T, ctx context.Context) (raw string, d1, d2 *zkDriver, key string) {
	t.Helper()
	raw = endpoint(t, "DLOCK_ZK_URL", "session_timeout="+sessionTimeout.String())
	for _, d := range []**zkDriver{&d1, &d2} {
		var err error
		if *d, err = openDriver(ctx, raw); err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = (*d).Close() })
	}
	return raw, d1, d2, fmt.Sprintf("lapse/%s/%d", t.Name(), time.Now().UnixNano())
}

func lapseRequest(key string, minHold time.Duration) driver.Request {
	return driver.Request{Key: key, TTL: sessionTimeout, Owner: newGUID(), MinHold: minHold}
}

// wantHeld checks that d cannot take key now, and is told for how long.
func wantHeld(t *testing.T, ctx context.Context, d *zkDriver, key, when string) {
	t.Helper()
	_, err := d.TryAcquire(ctx, lapseRequest(key, 0))
	var held *driver.HeldError
	if !errors.Is(err, driver.ErrNotAcquired) || !errors.As(err, &held) || held.Remaining <= 0 {
		t.Fatalf("TryAcquire %s: %v; want ErrNotAcquired with the time left", when, err)
	}
}

// A lapsing hold keeps its key held for d after ReleaseAfter, also once
// its driver is closed (which ends its session), then frees it: a waiter
// blocked in Acquire is granted, with a higher token.
func TestReleaseAfterHoldsThenFrees(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, d1, d2, key := lapseDrivers(t, ctx)
	h, err := d1.TryAcquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	const lapse = 3 * time.Second
	start := time.Now()
	if err := d1.ReleaseAfter(ctx, h, lapse); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	if err := d1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantHeld(t, ctx, d2, key, "during the lapse, after the releasing driver closed")
	if info, err := d2.Inspect(ctx, key); err != nil || !info.Held || info.Token != h.Token || info.Remaining <= 0 {
		t.Fatalf("Inspect during the lapse: %+v, %v; want held by token %d, with time left", info, err, h.Token)
	}
	h2, err := d2.Acquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("Acquire after the lapse: %v", err)
	}
	if took := time.Since(start); took < lapse {
		t.Fatalf("granted %v after ReleaseAfter(%v): the lapse ended early", took, lapse)
	}
	if h2.Token <= h.Token {
		t.Fatalf("token %d after the lapse, not above the lapsed hold's %d", h2.Token, h.Token)
	}
	if err := d2.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The marker ran out: taking the key again costs no wait.
	h3, err := d2.TryAcquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("TryAcquire after the lapse: %v", err)
	}
	_ = d2.Release(ctx, h3)
}

// A hold granted with a minimum whose session ends without a release (its
// process died) keeps its key held until the minimum has passed from the
// grant; a waiter queued meanwhile is granted then.
func TestMinHoldOutlivesSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, d1, d2, key := lapseDrivers(t, ctx)
	const least = 5 * time.Second
	start := time.Now()
	h1, err := d1.TryAcquire(ctx, lapseRequest(key, least))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	waited := make(chan error, 1)
	var h2 driver.Hold
	go func() {
		var err error
		h2, err = d2.Acquire(ctx, lapseRequest(key, 0))
		waited <- err
	}()
	if err := killSession(hosts(t, raw)[0], d1.sess.get()); err != nil {
		t.Fatalf("ending the holder's session: %v", err)
	}
	if ok, _, err := admin(t, raw).Exists(h1.State.(*zkHold).path); err != nil || ok {
		t.Fatalf("the holder's node after its session ended: exists %v, %v", ok, err)
	}
	// The waiter's node may be first by now, in which case it alone says
	// how long is left.
	if _, err := d2.TryAcquire(ctx, lapseRequest(key, 0)); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("TryAcquire after the holder's session ended, within its minimum: %v; want ErrNotAcquired", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Acquire after the minimum: %v", err)
	}
	if took := time.Since(start); took < least {
		t.Fatalf("granted %v after a grant with a minimum of %v, whose session was ended", took, least)
	}
	if err := d2.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// ReleaseAfter of a hold broken from outside changes nothing: no marker is
// written, the key's next holder keeps it, and the call says ErrNotHeld.
func TestReleaseAfterBroken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, d1, d2, key := lapseDrivers(t, ctx)
	h, err := d1.TryAcquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if _, err := d2.Break(ctx, key); err != nil {
		t.Fatalf("Break: %v", err)
	}
	h2, err := d2.TryAcquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("TryAcquire after Break: %v", err)
	}
	// A late duplicate of the broken hold, whose driver has not seen the
	// break: the server's answer alone must refuse it.
	hs := h.State.(*zkHold)
	late := driver.Hold{Token: h.Token, State: &zkHold{d: d1, path: hs.path, sid: hs.sid, ttl: hs.ttl, timer: time.NewTimer(time.Hour)}}
	if err := d1.ReleaseAfter(ctx, late, 3*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("ReleaseAfter of a broken hold, unseen by its driver: %v; want ErrNotHeld", err)
	}
	if err := d1.ReleaseAfter(ctx, h, 3*time.Second); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("ReleaseAfter of a broken hold: %v; want ErrNotHeld", err)
	}
	kp, err := KeyPath(testPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	adm := admin(t, raw)
	if ok, _, err := adm.Exists(kp + "/" + minHoldName); err != nil || ok {
		t.Fatalf("a stale ReleaseAfter left a minimum-hold marker (%v, %v)", ok, err)
	}
	if ok, _, err := adm.Exists(h2.State.(*zkHold).path); err != nil || !ok {
		t.Fatalf("the next holder's node after a stale ReleaseAfter: exists %v, %v", ok, err)
	}
	if err := d2.Release(ctx, h2); err != nil {
		t.Fatalf("Release of the next holder: %v", err)
	}
}

// Break frees a key held by a lapse alone: the marker goes too.
func TestBreakEndsLapse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, d1, d2, key := lapseDrivers(t, ctx)
	h, err := d1.TryAcquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := d1.ReleaseAfter(ctx, h, time.Minute); err != nil {
		t.Fatalf("ReleaseAfter: %v", err)
	}
	wantHeld(t, ctx, d2, key, "during the lapse")
	if _, err := d2.Break(ctx, key); err != nil {
		t.Fatalf("Break: %v", err)
	}
	h2, err := d2.TryAcquire(ctx, lapseRequest(key, 0))
	if err != nil {
		t.Fatalf("TryAcquire after Break of a lapsing key: %v", err)
	}
	_ = d2.Release(ctx, h2)
}

// The marker is no lock node: dlock's queue leaves it out.
func TestMinHoldMarkerNotQueued(t *testing.T) {
	q := queue([]string{minHoldName, "_c_" + newGUID() + lockInfix + "0000000007"})
	if len(q) != 1 || q[0].name == minHoldName {
		t.Fatalf("queue with the marker: %v; want the lock node only", q)
	}
}
