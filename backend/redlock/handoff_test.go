package redlock_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
)

// handoffEnv is a holder and a waiter on one key, each with its own Driver
// (as two processes would have), the holder holding.
type handoffEnv struct {
	ctx    context.Context
	prefix string
	key    string
	admin  []*redis.Client
	hold   *dlock.Mutex
	holder *dlock.Locker
	wd     *redlock.Driver
	wait   *dlock.Mutex
	got    chan error
}

// newHandoff locks key through the holder and starts the waiter's Lock,
// returning once the waiter stands in line on every instance.
func newHandoff(t *testing.T, ttl time.Duration) *handoffEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	prefix := testPrefix()
	// A long per-instance timeout (at most a tenth of the lease), so that a
	// loaded machine does not turn a handover into grants given back: a
	// waiter waits two of them after its first grant for a majority.
	raw := withParams(t, endpoint(t), "prefix", prefix, "timeout", "1s")
	e := &handoffEnv{ctx: ctx, prefix: prefix, key: "handoff", got: make(chan error, 1)}
	e.admin = adminClients(t, hostsOf(t, raw))
	var err error
	e.holder, err = dlock.NewLocker(openDriver(t, raw), dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	e.hold, _ = e.holder.NewMutex(e.key)
	if err := e.hold.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	e.wd = openDriver(t, raw)
	wl, err := dlock.NewLocker(e.wd, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	e.wait, _ = wl.NewMutex(e.key)
	go func() { e.got <- e.wait.Lock(ctx) }()
	for i := range e.admin {
		e.waitQueued(t, i, 1)
	}
	return e
}

// waitQueued polls instance i until its wake queue has n members.
func (e *handoffEnv) waitQueued(t *testing.T, i, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := e.admin[i].ZCard(e.ctx, e.prefix+"w:"+e.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got == int64(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %d: %d waiting in line; want %d", i, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waited returns the waiter's Lock result, failing after within.
func (e *handoffEnv) waited(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-e.got:
		if err != nil {
			t.Fatalf("waiting Lock: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("the waiting Lock still waits %v after the release", within)
	}
}

func (e *handoffEnv) requests() uint64 {
	var n uint64
	for _, s := range e.wd.Stats() {
		n += s.Requests
	}
	return n
}

// A release hands the lock to the first waiter in line on every instance
// at once: the lock is never free in between, so the releaser's own next
// TryLock is refused, and the waiter holds it without sending a request
// (every instance granted the same token, so no phase 2 either).
func TestReleaseHandsTheLockToTheWaiter(t *testing.T) {
	e := newHandoff(t, 10*time.Second)
	first := e.hold.Token()
	before := e.requests()
	if err := e.hold.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.hold.TryLock(e.ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock right after Unlock, with a waiter in line: %v; want ErrNotAcquired (the lock is the waiter's)", err)
	}
	e.waited(t, 5*time.Second)
	if got := e.wait.Token(); got <= first {
		t.Errorf("handed over with token %d; want more than the releaser's %d", got, first)
	}
	if n := e.requests() - before; n != 0 {
		t.Errorf("the waiter sent %d requests to take a lock handed to it; want 0", n)
	}
	// Unlock returns once a majority released; the other instances'
	// releases (and the grants they make) may still be on their way.
	for i := range e.admin {
		e.waitQueued(t, i, 0) // the waiter gone from every line
	}
	if err := e.wait.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.hold.TryLock(e.ctx); err != nil {
		t.Errorf("TryLock once nobody waits or holds: %v", err)
	}
	_ = e.hold.Unlock(e.ctx)
}

// A handed-over hold's window counts from the grant, less the clock-rate
// allowance on the time since the waiter's last refresh: it ends no later
// than the leases the grants set, and not a wait's length earlier.
func TestHandedLeaseCountsFromTheGrant(t *testing.T) {
	const ttl = 6 * time.Second // the waiter refreshes its entries every 2s
	e := newHandoff(t, ttl)
	time.Sleep(1500 * time.Millisecond)
	released := time.Now()
	if err := e.hold.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waited(t, 5*time.Second)
	lease := e.wait.Lease()
	allowance := ttl/100 + 2*time.Millisecond
	// The credit loses 1% of the 1.5s wait and a millisecond of rounding.
	if early := released.Add(ttl - allowance - 30*time.Millisecond); lease.Expires.Before(early) {
		t.Errorf("handed lease ends %v before the release plus TTL less the allowance: the wait was not counted as elapsed",
			early.Sub(lease.Expires).Round(time.Millisecond))
	}
	var minEnd time.Time
	for _, c := range e.admin {
		v, err := c.Get(e.ctx, e.prefix+"l:"+e.key).Result()
		if err != nil || !strings.Contains(v, ".") {
			continue // not a grant (yet): the release there is still on its way
		}
		pttl, err := c.PTTL(e.ctx, e.prefix+"l:"+e.key).Result()
		read := time.Now()
		if err != nil {
			t.Fatal(err)
		}
		if end := read.Add(pttl + time.Millisecond); minEnd.IsZero() || end.Before(minEnd) {
			minEnd = end
		}
	}
	if minEnd.IsZero() {
		t.Fatal("no instance holds the handed lock")
	}
	if lease.Expires.After(minEnd) {
		t.Errorf("handed lease ends %v after an instance's lease: the window outlasts the lock", lease.Expires.Sub(minEnd).Round(time.Millisecond))
	}
	_ = e.wait.Unlock(e.ctx)
}

// Grants from fewer than a majority make no hold. The waiter gives them
// back (each instance's release hands the lock on, here to nobody) and
// takes the lock by an attempt, at once, not when those grants' leases run
// out.
func TestPartialGrantsAreGivenBack(t *testing.T) {
	e := newHandoff(t, 30*time.Second)
	member, err := e.admin[0].ZRange(e.ctx, e.prefix+"w:"+e.key, 0, 0).Result()
	if err != nil || len(member) != 1 {
		t.Fatalf("line on instance 0: %v, %v", member, err)
	}
	// Out of line on a majority: only the others will grant it the lock.
	for _, c := range e.admin[:3] {
		if err := c.ZRem(e.ctx, e.prefix+"w:"+e.key, member[0]).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.HDel(e.ctx, e.prefix+"e:"+e.key, member[0]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	first := e.hold.Token()
	if err := e.hold.Unlock(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.waited(t, 5*time.Second)
	if got := e.wait.Token(); got <= first {
		t.Errorf("token %d after the releaser's %d", got, first)
	}
	// Lock returns once a majority granted it; the other instances' grants
	// may still be on their way (on a loaded machine, past this read).
	// Wait a while for them, and judge the instances that have one.
	owners := map[string]int{}
	for i, c := range e.admin {
		var v string
		for deadline := time.Now().Add(5 * time.Second); ; {
			v, err = c.Get(e.ctx, e.prefix+"l:"+e.key).Result()
			if !errors.Is(err, redis.Nil) || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if errors.Is(err, redis.Nil) {
			continue // its grant never landed: the hold stands on the others
		}
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		if v == member[0] {
			t.Errorf("instance %d is still the old member's (a grant not given back)", i)
		}
		owners[v]++
	}
	quorum := len(e.admin)/2 + 1
	if len(owners) != 1 || strings.Contains(strings.Join(slices.Collect(maps.Keys(owners)), ""), ".") || slices.Max(slices.Collect(maps.Values(owners))) < quorum {
		t.Errorf("owners after the attempt: %v; want the waiter's one owner on every instance that has the lock, at least %d", owners, quorum)
	}
	_ = e.wait.Unlock(e.ctx)
}
