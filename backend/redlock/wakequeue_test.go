package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redlock"
)

func TestMain(m *testing.M) {
	if raw := os.Getenv("DLOCK_REDLOCK_HELPER_URL"); raw != "" {
		helperWaiter(raw, os.Getenv("DLOCK_REDLOCK_HELPER_KEY"))
	}
	os.Exit(m.Run())
}

// helperWaiter waits for key until it is killed.
func helperWaiter(raw, key string) {
	ctx := context.Background()
	l, err := dlock.Open(ctx, raw)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	m, err := l.NewMutex(key)
	if err == nil {
		err = m.Lock(ctx)
	}
	fmt.Fprintf(os.Stderr, "helper: Lock returned %v before the helper was killed\n", err)
	os.Exit(2)
}

// waitWaiters polls Inspect until key has want waiters in line.
func waitWaiters(ctx context.Context, t *testing.T, l *dlock.Locker, key string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := l.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Waiters == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect: Waiters %d; want %d", info.Waiters, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requestsPerAcquisition runs n Lockers, each with its own Driver as
// separate processes would have, taking one key in turn until they made
// total acquisitions, and returns the requests they sent per acquisition.
func requestsPerAcquisition(t *testing.T, raw string, n, total int) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := "wake/flat/" + testPrefix()
	var (
		drivers []*redlock.Driver
		done    atomic.Int64
		wg      sync.WaitGroup
		errs    = make(chan error, n)
	)
	for range n {
		d := openDriver(t, raw)
		drivers = append(drivers, d)
		l, err := dlock.NewLocker(d)
		if err != nil {
			t.Fatal(err)
		}
		m, err := l.NewMutex(key)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < int64(total) {
				if err := m.Lock(ctx); err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Millisecond)
				if err := m.Unlock(ctx); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Lock/Unlock: %v", err)
	}
	var req uint64
	for _, d := range drivers {
		for _, s := range d.Stats() {
			req += s.Requests
		}
	}
	return float64(req) / float64(done.Load())
}

// A release wakes one waiter, not every one: the requests per acquisition
// stay the same with 2 and 8 waiting Lockers. With every waiter woken by
// every release (before the wake queue), they grew with the waiters: an
// attempt of five scripts from each.
func TestWakeQueueRequestsPerAcquisitionFlat(t *testing.T) {
	// A generous per-instance timeout, as in the other tests that count
	// rather than time: under a loaded -race run a release left
	// unanswered for the default 100ms failed the Unlock, and the test.
	raw := withParams(t, endpoint(t), "prefix", testPrefix(), "timeout", "2s")
	two := requestsPerAcquisition(t, raw, 2, 150)
	eight := requestsPerAcquisition(t, raw, 8, 150)
	t.Logf("requests per acquisition: %.1f with 2 Lockers, %.1f with 8", two, eight)
	if eight > 2*two {
		t.Errorf("requests per acquisition grew from %.1f with 2 Lockers to %.1f with 8: releases wake more than one waiter", two, eight)
	}
}

// A waiter that wins, and one that gives up, leave the wake queue of
// every instance.
func TestWakeQueueLeftWhenDone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := endpoint(t)
	prefix := testPrefix()
	raw = withParams(t, raw, "prefix", prefix)
	admin := adminClients(t, hostsOf(t, raw))
	key := "wake/left"
	queueLens := func() []int64 {
		var out []int64
		for _, c := range admin {
			n, err := c.ZCard(ctx, prefix+"w:"+key).Result()
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.HLen(ctx, prefix+"e:"+key).Result()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n+m)
		}
		return out
	}
	holder, err := dlock.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hm, _ := holder.NewMutex(key)
	if err := hm.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	// One gives up.
	quitter, err := dlock.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer quitter.Close()
	qm, _ := quitter.NewMutex(key)
	qctx, qcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = qm.Lock(qctx)
	qcancel()
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Lock under a holder: %v; want ErrNotAcquired", err)
	}
	for i, n := range queueLens() {
		if n != 0 {
			t.Errorf("instance %d: %d queue entries left by a Lock that gave up", i, n)
		}
	}

	// One wins.
	waiter, err := dlock.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	wm, _ := waiter.NewMutex(key)
	got := make(chan error, 1)
	go func() { got <- wm.Lock(ctx) }()
	waitWaiters(ctx, t, holder, key, 1)
	if err := hm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // the instances not awaited answer too
	for i, n := range queueLens() {
		if n != 0 {
			t.Errorf("instance %d: %d queue entries left by a waiter that won", i, n)
		}
	}
	_ = wm.Unlock(ctx)
}

// A waiter killed while first in line does not keep the next one waiting:
// the release finds nobody subscribed to its inbox and wakes the next
// waiter. Without that, the next waiter would wait for the lease it was
// last told of (30s here).
func TestWakeQueueKilledWaiter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := withParams(t, endpoint(t), "prefix", testPrefix())
	key := "wake/killed"
	holder, err := dlock.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	hm, _ := holder.NewMutex(key)
	if err := hm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DLOCK_REDLOCK_HELPER_URL="+raw, "DLOCK_REDLOCK_HELPER_KEY="+key)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitWaiters(ctx, t, holder, key, 1)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	next, err := dlock.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	nm, _ := next.NewMutex(key)
	got := make(chan error, 1)
	go func() { got <- nm.Lock(ctx) }()
	waitWaiters(ctx, t, holder, key, 2) // behind the dead waiter
	released := time.Now()
	if err := hm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Lock behind a dead waiter: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Lock behind a killed waiter still waits %v after the release", time.Since(released).Round(time.Millisecond))
	}
	_ = nm.Unlock(ctx)
}

// An observer's Watch still hears every release while Locks wait in line
// on other keys, and a Lock's wait in line does not need one.
func TestWatchHearsReleaseWithoutQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := withParams(t, endpoint(t), "prefix", testPrefix())
	d := openDriver(t, raw)
	l, err := dlock.NewLocker(d)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("wake/observed")
	w, err := d.Watch(ctx, "wake/observed")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not hear the release")
	}
}

// slowHook delays every command and pipeline while on is set.
type slowHook struct {
	on    *atomic.Bool
	delay time.Duration
}

func (h slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(h.delay)
		}
		return next(ctx, cmd)
	}
}

func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			time.Sleep(h.delay)
		}
		return next(ctx, cmds)
	}
}

// A waiter woken by the first instance a release reached, whose attempt
// overtakes the release on the others (refused there by the holder that
// is releasing), is woken again by those instances' messages of the same
// release. Before, every message after the first of one release was
// dropped, and such a waiter waited for the holder's whole lease (30s).
func TestWakeAfterAttemptOvertookRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := testPrefix()
	raw := withParams(t, endpoint(t), "prefix", prefix)
	// The holder's release reaches instances 2, 3 and 4 300ms after 0 and 1.
	slow := new(atomic.Bool)
	cs := adminClients(t, hostsOf(t, raw))
	for _, c := range cs[2:] {
		c.AddHook(slowHook{on: slow, delay: 300 * time.Millisecond})
	}
	holder, err := redlock.New(cs, redlock.Config{Prefix: prefix, Timeout: 2 * time.Second}, dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	waiter, err := dlock.Open(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	for round := range 3 {
		key := fmt.Sprintf("wake/overtaken/%d", round)
		hm, _ := holder.NewMutex(key)
		if err := hm.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		wm, _ := waiter.NewMutex(key, dlock.WithTTL(30*time.Second))
		got := make(chan error, 1)
		go func() { got <- wm.Lock(ctx) }()
		waitWaiters(ctx, t, waiter, key, 1)
		slow.Store(true)
		start := time.Now()
		err := hm.Unlock(ctx)
		slow.Store(false)
		if err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("round %d: waiter: %v", round, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the waiter was not served %v after the release began (the holder's lease is 30s)", round, time.Since(start).Round(time.Millisecond))
		}
		if err := wm.Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock of the waiter: %v", round, err)
		}
	}
}
