package consul

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// testLocker opens a Locker on the test agent with extra URL parameters.
func testLocker(t *testing.T, params string, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := open(ctx, testURL(t, endpoint(t), params))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func testKey(t *testing.T, suffix string) string {
	return "integration/" + benchRun() + "/" + t.Name() + "/" + suffix
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A session destroyed from outside closes Done, Unlock reports the loss,
// and the next holder's token is higher. Monitored holds notice at once;
// unmonitored ones at their next renewal.
func TestSessionDestroyedFromOutside(t *testing.T) {
	a := newAdmin(t, endpoint(t))
	for _, params := range []string{"lockdelay=0s", "lockdelay=0s&monitors=0", "lockdelay=0s&monitors=0&session_per_hold=true"} {
		t.Run(params, func(t *testing.T) {
			l1, l2 := testLocker(t, params), testLocker(t, params)
			key := testKey(t, "k")
			m1, err := l1.NewMutex(key, dlock.WithTTL(MinTTL))
			if err != nil {
				t.Fatal(err)
			}
			if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
				t.Fatalf("Lock: %v", err)
			}
			token, done := m1.Token(), m1.Done()
			if _, err := a.breakLease(ctxFor(t, 10*time.Second), key); err != nil {
				t.Fatalf("destroying the session: %v", err)
			}
			broken := time.Now()
			select {
			case <-done:
				t.Logf("Done closed %v after the session was destroyed", time.Since(broken))
			case <-time.After(2 * MinTTL):
				t.Fatal("Done still open long after the session was destroyed")
			}
			if err := m1.Unlock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("Unlock after the session was destroyed: %v; want ErrLockLost", err)
			}
			m2, err := l2.NewMutex(key, dlock.WithTTL(MinTTL))
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Lock(ctxFor(t, 30*time.Second)); err != nil {
				t.Fatalf("Lock by the next holder: %v", err)
			}
			if m2.Token() <= token {
				t.Fatalf("next holder's token %d; want greater than %d", m2.Token(), token)
			}
			if err := m2.Unlock(ctxFor(t, 10*time.Second)); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
		})
	}
}

// Lock-delay holds a key after its session is destroyed, and only then:
// an Unlock frees the key at once.
func TestLockDelay(t *testing.T) {
	const delay = 2 * time.Second
	a := newAdmin(t, endpoint(t))
	l1, l2 := testLocker(t, "lockdelay="+delay.String()), testLocker(t, "lockdelay=0s")
	key := testKey(t, "k")
	m1, _ := l1.NewMutex(key, dlock.WithTTL(MinTTL))
	m2, _ := l2.NewMutex(key, dlock.WithTTL(MinTTL))

	if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := m1.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TryLock right after an Unlock: %v (Unlock must not start a lock-delay)", err)
	}
	if err := m2.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	start := time.Now()
	if _, err := a.breakLease(ctxFor(t, 10*time.Second), key); err != nil {
		t.Fatalf("destroying the session: %v", err)
	}
	<-m1.Done()
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock during the lock-delay: %v; want ErrNotAcquired", err)
	}
	if err := m2.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock after the lock-delay: %v", err)
	}
	waited := time.Since(start)
	t.Logf("taken over %v after the session was destroyed (lock-delay %v)", waited, delay)
	if waited < delay {
		t.Fatalf("taken over %v after the session was destroyed, within its %v lock-delay", waited, delay)
	}
	_ = m2.Unlock(ctxFor(t, 10*time.Second))
}

// sessionModes are the URL parameters of the two ways holds get their
// session: one shared session per TTL (the default), or one each.
var sessionModes = []string{"lockdelay=0s", "lockdelay=0s&session_per_hold=true"}

// heldAndReleased opens a driver with params, takes a key with it and
// releases it, so that the hold's session waits in the pool (or stays the
// driver's shared session).
func heldAndReleased(t *testing.T, ctx context.Context, params string) (*consulDriver, driver.Request, driver.Hold) {
	t.Helper()
	d, err := open(ctx, testURL(t, endpoint(t), params))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	cd := d.(*consulDriver)
	req := driver.Request{Key: testKey(t, "k"), TTL: MinTTL, Owner: "a"}
	h, err := cd.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := cd.Release(ctx, h); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return cd, req, h
}

// A Release can never free a later hold, even one taken with the same
// (pooled or shared) session.
func TestReleaseGuardedByIndex(t *testing.T) {
	for _, params := range sessionModes {
		t.Run(params, func(t *testing.T) { testReleaseGuardedByIndex(t, params) })
	}
}

func testReleaseGuardedByIndex(t *testing.T, params string) {
	ctx := ctxFor(t, 30*time.Second)
	d, req, h1 := heldAndReleased(t, ctx, params)
	h2, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("second TryAcquire: %v", err)
	}
	if h2.State.(*hold).s != h1.State.(*hold).s {
		t.Fatal("the second hold did not reuse the first one's session; this test needs it to")
	}
	if h2.Token <= h1.Token {
		t.Fatalf("tokens %d then %d; want increasing", h1.Token, h2.Token)
	}
	// A duplicate of h1's release arriving late: same session, old index.
	hs1 := h1.State.(*hold)
	lateHold := &hold{path: hs1.path, s: hs1.s, ttl: hs1.ttl, token: hs1.token}
	late := driver.Hold{Token: h1.Token, State: lateHold}
	if err := d.Release(ctx, late); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("late Release of the first hold: %v; want ErrNotHeld", err)
	}
	if err := d.Release(ctx, h1); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("second Release of the first hold: %v; want ErrNotHeld", err)
	}
	if _, err := d.Renew(ctx, h2); err != nil {
		t.Fatalf("the later hold after the stale releases: %v; want it intact", err)
	}
	if err := d.Release(ctx, h2); err != nil {
		t.Fatalf("Release of the later hold: %v", err)
	}
}

// TTLs outside Consul's session range are refused up front.
func TestTTLLimits(t *testing.T) {
	l := testLocker(t, "")
	for _, ttl := range []time.Duration{time.Second, MinTTL - time.Millisecond, MaxTTL + time.Second} {
		if _, err := l.NewMutex("k", dlock.WithTTL(ttl)); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("NewMutex with TTL %v: %v; want ErrInvalidOption", ttl, err)
		}
	}
	if _, err := dlock.Open(ctxFor(t, 10*time.Second), endpoint(t)+"/"+testPrefix+"?ttl=5s"); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("Open with ttl=5s: %v; want ErrInvalidOption", err)
	}
	m, err := l.NewMutex(testKey(t, "k"), dlock.WithTTL(MinTTL+500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock with a fractional TTL: %v", err)
	}
	if got := m.Lease().TTL; got != MinTTL+500*time.Millisecond {
		t.Errorf("Lease().TTL = %v; want %v", got, MinTTL+500*time.Millisecond)
	}
	_ = m.Unlock(ctxFor(t, 10*time.Second))
}

// The longest keys, and keys of bytes an HTTP path cannot carry as they
// are, are locks of their own on a real agent.
func TestLongAndOddKeys(t *testing.T) {
	l1, l2 := testLocker(t, ""), testLocker(t, "")
	base := testKey(t, "")
	ctx := ctxFor(t, time.Minute)
	for _, k := range []string{
		strings.Repeat("\x00", driver.MaxKeyLen-len(base)),
		strings.Repeat("/..", (driver.MaxKeyLen-len(base))/3),
		strings.Repeat("~", driver.MaxKeyLen-len(base)),
	} {
		m, err := l1.NewMutex(base + k)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock(%d-byte key): %v", len(m.Key()), err)
		}
		p, _ := l2.NewMutex(m.Key())
		if err := p.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held %d-byte key through another Locker: %v", len(m.Key()), err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
}

// New uses the caller's client, and Close leaves it usable.
func TestNewWithOwnClient(t *testing.T) {
	// newClient closes the client's idle connections when the test ends,
	// so a connection it dialed late does not outlive the test and count
	// against the next one's goroutines.
	c := newClient(t, endpoint(t))
	l, err := New(c, Config{Prefix: testPrefix, LockDelay: -1}, dlock.WithTTL(MinTTL))
	if err != nil {
		t.Fatal(err)
	}
	m, _ := l.NewMutex(testKey(t, "k"))
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if m.Lease().TTL != MinTTL {
		t.Fatalf("Lease().TTL = %v; want the default given to New, %v", m.Lease().TTL, MinTTL)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := c.Status().Leader(); err != nil {
		t.Fatalf("the caller's client after Close: %v", err)
	}
	kv, _, err := c.KV().Get(testPrefix+"/"+encodeKey(m.Key()), nil)
	if err != nil || kv != nil {
		t.Fatalf("key after Close: %+v, %v; want deleted", kv, err)
	}
}

// Close ends everything the Locker started: monitors, watches of waiting
// Locks, background cleanup, and the connections of its own clients.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	l := testLocker(t, "lockdelay=0s")
	other := testLocker(t, "lockdelay=0s")
	key := testKey(t, "k")
	held, _ := l.NewMutex(key, dlock.WithTTL(MinTTL))
	if err := held.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// A waiter of its own Locker on a key another Locker holds: a watch.
	busy := testKey(t, "busy")
	ob, _ := other.NewMutex(busy, dlock.WithTTL(MinTTL))
	if err := ob.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	waiter, _ := l.NewMutex(busy, dlock.WithTTL(MinTTL))
	waited := make(chan error, 1)
	go func() { waited <- waiter.Lock(ctxFor(t, time.Minute)) }()
	time.Sleep(300 * time.Millisecond) // let it watch
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-waited; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiting Lock when its Locker closed: %v; want ErrClosed", err)
	}
	if err := other.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Well before idle connections would time out on their own: Close
	// must close them.
	deadline := time.Now().Add(idleConnTimeout - time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An idle pooled (or shared) session destroyed from outside is replaced,
// not reported.
func TestPooledSessionDestroyed(t *testing.T) {
	for _, params := range sessionModes {
		t.Run(params, func(t *testing.T) { testPooledSessionDestroyed(t, params) })
	}
}

func testPooledSessionDestroyed(t *testing.T, params string) {
	ctx := ctxFor(t, 30*time.Second)
	a := newAdmin(t, endpoint(t))
	d, req, h1 := heldAndReleased(t, ctx, params)
	pooled := h1.State.(*hold).s
	if _, err := a.c.Session().Destroy(pooled.id, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	h2, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire after the pooled session was destroyed: %v", err)
	}
	if h2.State.(*hold).s == pooled {
		t.Fatal("the destroyed session was used")
	}
	if err := d.Release(ctx, h2); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
