package redis

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// commandCalls is the number of commands the server has run (INFO
// commandstats, Lua's inner commands included), less INFO itself and the
// connection set-up commands.
func commandCalls(ctx context.Context, t testing.TB, c *goredis.Client) int64 {
	t.Helper()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	var calls int64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "info", "hello", "client|setinfo", "client|setname", "auth", "select", "ping":
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if k, v, _ := strings.Cut(f, "="); k == "calls" {
				n, _ := strconv.ParseInt(v, 10, 64)
				calls += n
			}
		}
	}
	return calls
}

// commandsPerAcquisition runs lockers Lockers, each in a loop of Lock, a
// short hold and Unlock on one key, and returns the server's commands per
// acquisition over acquisitions made while every Locker was waiting its
// turn (counted between two samples taken by holders, after a warm-up).
func commandsPerAcquisition(t *testing.T, srv *tempServer, lockers, measured int) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := srv.client()
	key := "queue/commands/" + randomHex(6)
	warm := 2 * lockers // every Locker has waited at least once
	var (
		acquired atomic.Int64
		before   int64
		per      float64
		wg       sync.WaitGroup
		errMu    sync.Mutex
		firstErr error
	)
	stop, stopAll := context.WithCancel(ctx)
	defer stopAll()
	for i := 0; i < lockers; i++ {
		l, err := openLocker(ctx, srv.url()+"?prefix=queue", dlock.WithTTL(30*time.Second))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		m, err := l.NewMutex(key)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for stop.Err() == nil {
				if err := m.Lock(stop); err != nil {
					if stop.Err() == nil {
						errMu.Lock()
						firstErr = errors.Join(firstErr, err)
						errMu.Unlock()
						stopAll()
					}
					return
				}
				switch n := acquired.Add(1); n {
				case int64(warm):
					before = commandCalls(ctx, t, admin)
				case int64(warm + measured):
					per = float64(commandCalls(ctx, t, admin)-before) / float64(measured)
					stopAll()
				}
				time.Sleep(200 * time.Microsecond)
				if err := m.Unlock(ctx); err != nil {
					errMu.Lock()
					firstErr = errors.Join(firstErr, err)
					errMu.Unlock()
					stopAll()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if acquired.Load() < int64(warm+measured) {
		t.Fatalf("only %d acquisitions", acquired.Load())
	}
	return per
}

// The server's work per acquisition does not grow with the number of
// waiting Lockers: a release wakes only the next waiter in line, instead
// of every waiter making an attempt. Counted by INFO commandstats on a
// server of this test's own, not timed.
func TestQueueCommandsPerAcquisitionFlat(t *testing.T) {
	srv := startTempServer(t)
	counts := map[int]float64{}
	for _, n := range []int{2, 8, 32} {
		counts[n] = commandsPerAcquisition(t, srv, n, 200)
		t.Logf("%2d waiting Lockers: %.1f commands per acquisition", n, counts[n])
	}
	lo, hi := counts[2], counts[2]
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi > lo*1.15 {
		t.Fatalf("commands per acquisition grow with the waiters: %v (2, 8 and 32 Lockers); want within 15%%", counts)
	}
}

// waitWaiters polls Inspect until key has want live waiters.
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

// Waiters are served in the order they queued, each in its own Locker,
// and TryLock does not queue.
func TestQueueFIFO(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		raw := withParams(t, endpoint, "prefix", testPrefix)
		open := func() *dlock.Locker {
			l, err := openLocker(ctx, raw)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		key := "queue/fifo/" + randomHex(6)
		holder := open()
		hm, _ := holder.NewMutex(key)
		if err := hm.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		tm, _ := open().NewMutex(key)
		if err := tm.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held key: %v; want ErrNotAcquired", err)
		}
		waitWaiters(ctx, t, holder, key, 0) // TryLock did not queue

		const n = 6
		var (
			mu    sync.Mutex
			order []int
			wg    sync.WaitGroup
		)
		for i := 0; i < n; i++ {
			m, _ := open().NewMutex(key)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.Lock(ctx); err != nil {
					t.Errorf("waiter %d: Lock: %v", i, err)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if err := m.Unlock(ctx); err != nil {
					t.Errorf("waiter %d: Unlock: %v", i, err)
				}
			}()
			waitWaiters(ctx, t, holder, key, i+1) // i has queued before i+1 starts
		}
		// A TryLock while waiters queue does not jump the line, even in the
		// moment between a release and the next holder.
		if err := tm.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock with waiters queued: %v; want ErrNotAcquired", err)
		}
		if err := hm.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		wg.Wait()
		for i, got := range order {
			if got != i {
				t.Fatalf("waiters acquired in the order %v; want the order they queued", order)
			}
		}
		if len(order) != n {
			t.Fatalf("%d of %d waiters acquired", len(order), n)
		}
		waitWaiters(ctx, t, holder, key, 0)
		if err := tm.TryLock(ctx); err != nil {
			t.Fatalf("TryLock once everyone was served: %v", err)
		}
		_ = tm.Unlock(ctx)
	})
}

// lockAsync locks m in a goroutine and sends when Lock returned; the
// channel is closed, and the test marked failed, if Lock failed.
func lockAsync(ctx context.Context, t *testing.T, m *dlock.Mutex) <-chan time.Time {
	got := make(chan time.Time, 1)
	go func() {
		if err := m.Lock(ctx); err != nil {
			t.Errorf("waiter: Lock: %v", err)
			close(got)
			return
		}
		got <- time.Now()
	}()
	return got
}

// A waiter handed the lock by a release gets about a whole lease, counted
// from the grant, not from its last refused attempt (up to a refresh
// interval, driver.RenewInterval, earlier): on a link with a long round trip, a window
// that short left too little time for the first renewal to return.
func TestGrantedHoldHasAWholeLease(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		const ttl = 3 * time.Second
		raw := withParams(t, endpoint, "prefix", testPrefix)
		open := func() *dlock.Locker {
			l, err := openLocker(ctx, raw)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			t.Cleanup(func() { _ = l.Close() })
			return l
		}
		key := "queue/whole/" + randomHex(6)
		holder := open()
		hm, _ := holder.NewMutex(key, dlock.WithTTL(ttl))
		if err := hm.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		wm, _ := open().NewMutex(key, dlock.WithTTL(ttl))
		got := lockAsync(ctx, t, wm)
		waitWaiters(ctx, t, holder, key, 1)
		// Most of a refresh interval after the waiter's attempt ran.
		time.Sleep(driver.RenewInterval(ttl) * 3 / 4)
		if err := hm.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		at, ok := <-got
		if !ok {
			return
		}
		defer func() { _ = wm.Unlock(ctx) }()
		left := time.Until(wm.Lease().Expires) + time.Since(at)
		// A whole lease less the drift allowance (32 ms) and the grant's
		// trip; the old count from the refused attempt left about 2.2 s.
		if left < ttl-ttl/10 {
			t.Fatalf("granted hold has %v of its %v lease left when Lock returned; want at least %v", left, ttl, ttl-ttl/10)
		}
		// And the window still ends before the server's lease does.
		pttl, err := adminClient(t, endpoint).PTTL(ctx, LockKey(testPrefix, key)).Result()
		if err != nil {
			t.Fatalf("PTTL: %v", err)
		}
		if srv := time.Until(wm.Lease().Expires); pttl < srv {
			t.Fatalf("validity window ends in %v, after the server's lease (PTTL %v)", srv, pttl)
		}
	})
}
