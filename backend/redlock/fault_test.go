package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/internal/topology"
)

// The fault tests run on five Redis masters of their own, on free ports,
// so that killing and pausing them never disturbs the shared topology that
// other packages' tests use at the same time.

// masters is a private redlock topology.
type masters struct {
	l     *launcher.Launcher
	nodes []string
	addrs []string
	url   string // redlock://... with a 500ms per-instance timeout
}

func privateMasters(t *testing.T) *masters {
	t.Helper()
	if testing.Short() {
		t.Skip("fault tests start their own servers")
	}
	if _, err := exec.LookPath(topology.RedisServer); err != nil {
		if testenv.Required("DLOCK_REDLOCK_URL") {
			t.Fatalf("%v (%s requires the redlock backend)", err, testenv.RequireVar)
		}
		t.Skip(err)
	}
	base, ok := topology.Lookup(topology.All(), "redlock")
	if !ok {
		t.Fatal("no redlock topology")
	}
	tp, err := launcher.Private(base, fmt.Sprintf("rlfault%d", rand.IntN(1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := launcher.New(t.TempDir(), []topology.Topology{tp})
	if err != nil {
		t.Fatal(err)
	}
	l.ReadyTimeout = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("stopping the private masters: %v", err)
		}
	})
	if err := l.Up(ctx, []string{tp.Name}); err != nil {
		t.Fatal(err)
	}
	m := &masters{l: l}
	for _, n := range tp.Nodes {
		m.nodes = append(m.nodes, n.Name)
		m.addrs = append(m.addrs, n.Addr())
	}
	m.url = "redlock://" + strings.Join(m.addrs, ",") + "?timeout=500ms&prefix=" + testPrefix()
	return m
}

// down kills nodes i... (0-based) and restarts them when the test ends.
func (m *masters) down(t *testing.T, idx ...int) {
	t.Helper()
	ctx := context.Background()
	for _, i := range idx {
		node := m.nodes[i]
		if err := m.l.Kill(ctx, node); err != nil {
			t.Fatalf("kill %s: %v", node, err)
		}
		t.Cleanup(func() { _ = m.l.Start(ctx, node) })
	}
}

// up starts the masters idx again. A master just killed may leave its port
// bound for a moment (a save child it forked still holds the listening
// socket), so a start that finds the port taken is tried again for a while.
func (m *masters) up(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := m.l.Start(context.Background(), m.nodes[i])
			if err == nil {
				break
			}
			if !strings.Contains(err.Error(), "already in use") || time.Now().After(deadline) {
				t.Fatalf("start %s: %v", m.nodes[i], err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (m *masters) locker(t *testing.T, opts ...dlock.Option) (*dlock.Locker, *redlock.Driver) {
	t.Helper()
	d := openDriver(t, m.url)
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, d
}

// contend runs goroutines over two Lockers on one key and checks, inside
// each critical section, that nobody else is inside and that the token is
// greater than every token seen before it. It returns the last token.
func contend(t *testing.T, m *masters, key string, after dlock.Token) dlock.Token {
	t.Helper()
	const goroutines, rounds = 4, 8
	l1, _ := m.locker(t, dlock.WithTTL(10*time.Second))
	l2, _ := m.locker(t, dlock.WithTTL(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		last     = after
		inside   atomic.Int32
		overlaps atomic.Int32
		wg       sync.WaitGroup
		errs     = make(chan error, goroutines)
	)
	for g := range goroutines {
		l := []*dlock.Locker{l1, l2}[g%2]
		mx, err := l.NewMutex(key)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := mx.Lock(ctx); err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				mu.Lock()
				if tok := mx.Token(); tok <= last {
					errs <- fmt.Errorf("token %d after %d", tok, last)
				} else {
					last = tok
				}
				mu.Unlock()
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := mx.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("Unlock: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d overlapping critical sections", n)
	}
	return last
}

// Two of five masters dead: the other three are a majority, so locks are
// still granted, exclude each other, and tokens keep growing; once the two
// come back (empty), that goes on.
func TestFaultTwoOfFiveDown(t *testing.T) {
	m := privateMasters(t)
	tok := contend(t, m, "k", 0)
	m.down(t, 0, 3)
	tok = contend(t, m, "k", tok)
	m.up(t, 0, 3)
	tok = contend(t, m, "k", tok)
	t.Logf("last token %d", tok)
}

// Three of five dead: no majority. Lock and TryLock fail with
// ErrUnavailable (quorum unreachable), never with a hold; the survivors are
// left clean; a hold taken before the failure is reported lost before its
// lease can end; and after the restart locks work again with greater tokens.
func TestFaultThreeOfFiveDown(t *testing.T) {
	m := privateMasters(t)
	const ttl = 3 * time.Second
	l, _ := m.locker(t, dlock.WithTTL(ttl))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	held, _ := l.NewMutex("held")
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	heldTok := held.Token()

	m.down(t, 1, 2, 4)

	// The hold: renewals fail on a majority; Done must close while the
	// last lease granted still runs.
	var lastExpires time.Time
	for !isClosed(held.Done()) {
		if lease := held.Lease(); !lease.Expires.IsZero() {
			lastExpires = lease.Expires
		}
		if time.Since(lastExpires) > ttl {
			t.Fatal("Done still open long after the lease ended")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if closed := time.Now(); !closed.Before(lastExpires) {
		t.Errorf("loss signalled %v after the lease ended; want before", closed.Sub(lastExpires))
	}
	if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Errorf("Unlock of the lost hold: %v; want ErrLockLost", err)
	}

	mx, _ := l.NewMutex("k")
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	err := mx.Lock(lctx)
	if !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Lock with 3 of 5 masters down: %v; want ErrUnavailable", err)
	}
	if lctx.Err() != nil {
		t.Errorf("Lock waited out its context (%v) instead of reporting the lost quorum", err)
	}
	lcancel()
	t.Logf("Lock: %v", err)
	if err := mx.TryLock(ctx); !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("TryLock with 3 of 5 masters down: %v; want ErrUnavailable", err)
	}
	if mx.Token() != 0 {
		t.Fatal("a Mutex reports a hold without a quorum")
	}
	admin := adminClients(t, []string{m.addrs[0], m.addrs[3]})
	for _, c := range admin {
		keys, err := c.Keys(ctx, "*l:k").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("a failed attempt left %v on a surviving master", keys)
		}
	}

	m.up(t, 1, 2, 4)
	if err := mx.Lock(ctx); err != nil {
		t.Fatalf("Lock after the masters came back: %v", err)
	}
	_ = mx.Unlock(ctx)
	if err := held.Lock(ctx); err != nil {
		t.Fatalf("Lock after the masters came back: %v", err)
	}
	if held.Token() <= heldTok {
		t.Errorf("token %d after the restart; want greater than %d", held.Token(), heldTok)
	}
	_ = held.Unlock(ctx)
}

// A majority of masters restarted empty (no persistence) right after a key
// was first locked, and then the masters that remember its counter gone:
// the next token comes only from counters seeded again from the clock, and
// must still be greater than the last one.
func TestFaultRestartEmptyMajority(t *testing.T) {
	m := privateMasters(t)
	l, _ := m.locker(t, dlock.WithTTL(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mx, _ := l.NewMutex("fresh")
	if err := mx.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	last := mx.Token()
	if err := mx.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m.down(t, 1, 2, 4)
	m.up(t, 1, 2, 4)
	m.down(t, 0, 3)
	if err := mx.Lock(ctx); err != nil {
		t.Fatalf("Lock on the three masters restarted empty: %v", err)
	}
	t.Logf("token %d before the restart, %d after", last, mx.Token())
	if mx.Token() <= last {
		t.Errorf("token %d from masters restarted empty; want greater than %d", mx.Token(), last)
	}
	_ = mx.Unlock(ctx)
}

// A waiter refused in a split is woken when the split ends. Two masters
// restarted empty leave the key held on three: the waiter wins the two and
// is refused by the three. Then one of the three restarts empty too, so the
// key is free on a majority (Redlock's documented hazard without
// persistence, which fault cell 7c shows): nothing is released, so no
// message comes, and the waiter must notice without sleeping out its
// holder's long lease.
func TestFaultWaiterWokenWhenSplitEnds(t *testing.T) {
	m := privateMasters(t)
	const lease = 40 * time.Second
	holder, _ := m.locker(t, dlock.WithTTL(lease))
	waiter, _ := m.locker(t, dlock.WithTTL(lease))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hm, _ := holder.NewMutex("split")
	if err := hm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m.down(t, 3, 4)
	m.up(t, 3, 4)
	wm, _ := waiter.NewMutex("split")
	got := make(chan error, 1)
	go func() { got <- wm.Lock(ctx) }()
	waitWaiters(ctx, t, holder, "split", 1)
	m.down(t, 0)
	// Long enough for the waiter to be woken by its broken connection and
	// to try again while master 0 is down: won on 3 and 4, refused on 1
	// and 2, no answer from 0.
	time.Sleep(time.Second)
	m.up(t, 0)
	start := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock: %v", err)
		}
		t.Logf("waiter acquired %v after master 0 came back empty", time.Since(start))
		_ = wm.Unlock(ctx)
	case <-time.After(lease / 2):
		t.Fatalf("waiter still waiting %v after the key was free on a majority; it would sleep out the %v lease", lease/2, lease)
	}
}

// A paused (SIGSTOP) master answers nothing: the acquire goes on with the
// other four (it returns once a majority granted it, so the paused one
// costs nothing, and never more than the per-instance timeout), and the
// paused master's timeout shows in the driver's counters.
func TestFaultPausedMaster(t *testing.T) {
	m := privateMasters(t)
	l, d := m.locker(t, dlock.WithTTL(10*time.Second))
	mx, _ := l.NewMutex("k")
	ctx := context.Background()
	// Connect everywhere first, so the pause hits live connections too.
	if err := mx.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := mx.Token()
	if err := mx.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	const paused = 2
	if err := m.l.Pause(ctx, m.nodes[paused]); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := m.l.Resume(ctx, m.nodes[paused]); err != nil {
				t.Errorf("resume: %v", err)
			}
		}
	}
	t.Cleanup(resume)

	before := d.Stats()[paused]
	// A few seconds bound a hang; the per-instance timeout is 500ms.
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := mx.Lock(lctx); err != nil {
		t.Fatalf("Lock with one master paused: %v", err)
	}
	t.Logf("Lock with one master paused took %v", time.Since(start))
	if mx.Token() <= tok {
		t.Errorf("token %d; want greater than %d", mx.Token(), tok)
	}
	// Lock did not wait for the paused master (a majority answered); its
	// request there runs out of its timeout in the background.
	for d.Stats()[paused].Timeouts <= before.Timeouts {
		if lctx.Err() != nil {
			t.Fatalf("paused master's timeouts still %d; want its timeout to have been hit", before.Timeouts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i, s := range d.Stats() {
		if i != paused && s.Errors != 0 {
			t.Errorf("master %d (running): %d errors", i, s.Errors)
		}
	}
	// A waiter on another Locker is woken by the release, through the
	// masters that are not paused: it must get the lock long before the
	// holder's 10s lease could run out.
	l2, _ := m.locker(t, dlock.WithTTL(10*time.Second))
	waiter, _ := l2.NewMutex("k")
	got := make(chan error, 1)
	go func() { got <- waiter.Lock(lctx) }()
	time.Sleep(200 * time.Millisecond)
	if err := mx.Unlock(lctx); err != nil {
		t.Fatalf("Unlock with one master paused: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter with one master paused: %v (not woken by the release)", err)
	}
	tok = waiter.Token()
	if err := waiter.Unlock(lctx); err != nil {
		t.Fatalf("waiter's Unlock: %v", err)
	}

	resume()
	if err := mx.Lock(ctx); err != nil {
		t.Fatalf("Lock after resume: %v", err)
	}
	if mx.Token() <= tok {
		t.Errorf("token after resume %d; want greater than %d", mx.Token(), tok)
	}
	_ = mx.Unlock(ctx)
}

// With a master paused, a batch of renewals of three chunks renews every
// hold on the other four; its requests to the paused one run out of their
// per-instance timeout.
func TestFaultPausedMasterRenewBatch(t *testing.T) {
	const n, paused = 3*256 - 100, 1
	m := privateMasters(t)
	d := openDriver(t, m.url)
	ctx := context.Background()
	hs := make([]driver.Hold, n)
	for i := range hs {
		h, err := d.TryAcquire(ctx, driver.Request{Key: "batch" + strconv.Itoa(i), TTL: time.Minute, Owner: "o" + strconv.Itoa(i)})
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	if err := m.l.Pause(ctx, m.nodes[paused]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.l.Resume(ctx, m.nodes[paused]); err != nil {
			t.Errorf("resume: %v", err)
		}
	})
	before := d.Stats()[paused].Timeouts
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ttls, errs := d.RenewBatch(bctx, hs)
	if bctx.Err() != nil {
		t.Fatalf("RenewBatch with one master paused returned only when its context ended (%v)", bctx.Err())
	}
	for i := range hs {
		if errs[i] != nil || ttls[i] <= 0 {
			t.Fatalf("hold %d of %d with one master paused: ttl %v, %v; want renewed", i, n, ttls[i], errs[i])
		}
	}
	// Its requests there run out of their timeout.
	for d.Stats()[paused].Timeouts <= before {
		if bctx.Err() != nil {
			t.Fatalf("paused master's timeouts still %d; want its requests given up", before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
