package consul

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// countingTransport counts the session renewals and transactions a client
// sends.
type countingTransport struct {
	renews, txns atomic.Int64
	next         http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/v1/session/renew/"):
		c.renews.Add(1)
	case r.URL.Path == "/v1/txn":
		c.txns.Add(1)
	}
	return c.next.RoundTrip(r)
}

// countedLocker is a Locker (New, the caller's client) whose requests ct
// counts.
func countedLocker(t *testing.T, params string, opts ...dlock.Option) (*dlock.Locker, *countingTransport) {
	t.Helper()
	tr := api.DefaultConfig().Transport
	t.Cleanup(tr.CloseIdleConnections)
	ct := &countingTransport{next: tr}
	cfg := api.DefaultConfig()
	cfg.Address = testURL(t, endpoint(t), "").Host
	cfg.HttpClient = &http.Client{Transport: ct}
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(c, Config{Prefix: testPrefix, LockDelay: -1, SessionPerHold: params == "session_per_hold"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, ct
}

// lockMany locks n keys through l and returns their Mutexes, unlocked when
// the test ends.
func lockMany(t *testing.T, l *dlock.Locker, n int, prefix string, opts ...dlock.Option) []*dlock.Mutex {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	ms := make([]*dlock.Mutex, n)
	for i := range ms {
		m, err := l.NewMutex(testKey(t, prefix+strconv.Itoa(i)), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock %d: %v", i, err)
		}
		ms[i] = m
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, m := range ms {
			_ = m.Unlock(ctx)
		}
	})
	return ms
}

// sessionsOf returns the sessions that lock the keys of ms on the agent.
func sessionsOf(t *testing.T, ms []*dlock.Mutex) map[string]int {
	t.Helper()
	a := newAdmin(t, endpoint(t))
	ctx := ctxFor(t, 30*time.Second)
	out := map[string]int{}
	for _, m := range ms {
		kv, _, err := a.c.KV().Get(testPrefix+"/"+encodeKey(m.Key()), (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if kv == nil || kv.Session == "" {
			t.Fatalf("key %q is not locked", m.Key())
		}
		out[kv.Session]++
	}
	return out
}

// The holds of a Locker share one session per TTL, renewed once per
// renewal pass for all of them: over two renewal rounds of 1,000 holds, a
// handful of session renewals, not one per hold per round (sessions of
// their own cost 2,000), and every hold renewed and none lost.
func TestSharedSessionOneRenewalPerRound(t *testing.T) {
	const n = 1000
	l, ct := countedLocker(t, "", dlock.WithTTL(MinTTL))
	ms := lockMany(t, l, n, "shared-")
	if s := sessionsOf(t, ms); len(s) != 1 {
		t.Fatalf("%d holds on %d sessions; want one shared session", n, len(s))
	}
	first := make([]time.Time, n)
	for i, m := range ms {
		first[i] = m.Lease().Expires
	}
	r0, x0 := ct.renews.Load(), ct.txns.Load()
	// Renewals fall due driver.RenewInterval after each hold's last one.
	time.Sleep(2*driver.RenewInterval(MinTTL) + 1500*time.Millisecond)
	renews, txns := ct.renews.Load()-r0, ct.txns.Load()-x0
	for i, m := range ms {
		select {
		case <-m.Done():
			t.Fatalf("hold %s lost: %v", m.Key(), m.Err())
		default:
		}
		if !m.Lease().Expires.After(first[i].Add(MinTTL / 2)) {
			t.Fatalf("hold %s not renewed twice: Expires moved %v", m.Key(), m.Lease().Expires.Sub(first[i]))
		}
	}
	t.Logf("%d session renewals and %d transactions renewed %d holds twice", renews, txns, n)
	if renews > 30 {
		t.Fatalf("%d session renewals for two rounds of %d holds; want a few for the one shared session", renews, n)
	}
}

// A shared session that ends ends every hold on it, each with its own Done
// and ErrLockLost: the monitored ones at once, the others at their next
// renewal. The Locker goes on with a new session.
func TestSharedSessionLossEndsEveryHold(t *testing.T) {
	const n = 200 // more than the 64 monitors
	l := testLocker(t, "lockdelay=0s", dlock.WithTTL(MinTTL))
	ms := lockMany(t, l, n, "lost-")
	sessions := sessionsOf(t, ms)
	if len(sessions) != 1 {
		t.Fatalf("%d holds on %d sessions; want one shared session", n, len(sessions))
	}
	a := newAdmin(t, endpoint(t))
	ctx := ctxFor(t, time.Minute)
	for id := range sessions {
		if _, err := a.c.Session().Destroy(id, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			t.Fatal(err)
		}
	}
	wait := time.After(MinTTL)
	for _, m := range ms {
		select {
		case <-m.Done():
		case <-wait:
			t.Fatalf("hold %s: Done still open a TTL after its shared session was destroyed", m.Key())
		}
		if !errors.Is(m.Err(), dlock.ErrLockLost) {
			t.Fatalf("hold %s: Err %v; want ErrLockLost", m.Key(), m.Err())
		}
	}
	after := lockMany(t, l, 1, "after-")
	for id := range sessionsOf(t, after) {
		if sessions[id] > 0 {
			t.Fatal("a new hold went on the destroyed session")
		}
	}
}

// A hold whose owner stops renewing (autorenew off) ends on the server
// even though its session is shared with a hold that goes on being
// renewed: another Locker gets the key once its validity has run out
// (the sweep before a renewal of the shared session deletes it), while the
// renewed hold stays held. Without the sweep the shared renewals would
// keep the abandoned key locked for as long as the other hold lasted.
func TestSharedSessionDoesNotKeepAnUnrenewedHold(t *testing.T) {
	l1 := testLocker(t, "lockdelay=0s", dlock.WithTTL(MinTTL))
	l2 := testLocker(t, "lockdelay=0s")
	ctx := ctxFor(t, time.Minute)
	kept, _ := l1.NewMutex(testKey(t, "kept"))
	left, _ := l1.NewMutex(testKey(t, "left"), dlock.WithAutoRenew(false))
	if err := kept.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := left.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if s := sessionsOf(t, []*dlock.Mutex{kept, left}); len(s) != 1 {
		t.Fatalf("2 holds on %d sessions; want one shared session", len(s))
	}
	other, _ := l2.NewMutex(left.Key())
	start := time.Now()
	// Well before the shared session could expire (2 TTLs after its last
	// renewal, which goes on): only the sweep frees the key.
	wctx, cancel := context.WithTimeout(ctx, 2*MinTTL-time.Second)
	defer cancel()
	if err := other.Lock(wctx); err != nil {
		t.Fatalf("another Locker did not get a key whose holder stopped renewing: %v", err)
	}
	t.Logf("taken over %v after the holder stopped renewing (TTL %v)", time.Since(start), MinTTL)
	_ = other.Unlock(ctx)
	select {
	case <-left.Done():
	default:
		t.Fatal("the unrenewed hold's Done is open after its key was taken")
	}
	select {
	case <-kept.Done():
		t.Fatalf("the renewed hold was lost: %v", kept.Err())
	default:
	}
}

// An acquire whose answer was lost is undone in the background only if it
// was applied: the key is deleted when it carries the acquire's nonce, and
// left alone when it carries another's (a later hold on the same shared
// session).
func TestAbandonedAcquireUndoneOnlyIfApplied(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	d, req, _ := heldAndReleased(t, ctx, "lockdelay=0s")
	h, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	hs := h.State.(*hold)
	hs.stopMonitor() // waitBackground waits for background requests only
	a := newAdmin(t, endpoint(t))
	read := func() *api.KVPair {
		kv, _, err := a.c.KV().Get(hs.path, (&api.QueryOptions{}).WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		return kv
	}
	kv := read()
	if kv == nil || kv.Session != hs.s.id || kv.Flags == 0 {
		t.Fatalf("key after the acquire: %+v; want locked by the shared session with a nonce", kv)
	}
	hs.s.use()
	d.abandonAcquire(hs.path, hs.s, kv.Flags+2)
	waitBackground(d)
	if got := read(); got == nil || got.ModifyIndex != kv.ModifyIndex {
		t.Fatalf("another acquire's undo changed the key: %+v", got)
	}
	hs.s.use()
	d.abandonAcquire(hs.path, hs.s, kv.Flags)
	waitBackground(d)
	if got := read(); got != nil {
		t.Fatalf("the acquire's own undo left the key: %+v", got)
	}
}

// waitBackground waits for d's background requests.
func waitBackground(d *consulDriver) {
	d.bgMu.Lock()
	for d.bgN > 0 {
		d.bgCond.Wait()
	}
	d.bgMu.Unlock()
}
