package redis

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// slowDial makes every new connection of a client take delay to dial
// while on is set, as on a slow link: the client's pooled connection is
// unaffected, but its first pub/sub connection is late.
type slowDial struct {
	on    *atomic.Bool
	delay time.Duration
}

func (h slowDial) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.on.Load() {
			select {
			case <-time.After(h.delay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return next(ctx, network, addr)
	}
}

func (slowDial) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }
func (slowDial) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// A waiter joins the queue only once its inbox is subscribed. A release
// while its subscription is still being made must not grant it the lock:
// told of nothing, it would find the hold its own only at its next attempt,
// with much of the lease gone (fault cell 5b lost holds this way on links
// slowed to 100 ms each way).
func TestNotQueuedBeforeSubscribed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	endpoint := testenv.Endpoint(t, "DLOCK_REDIS_URL")
	opt, err := goredis.ParseURL(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	var slow atomic.Bool
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	c.AddHook(slowDial{on: &slow, delay: ttl * 3 / 4})
	if err := c.Ping(ctx).Err(); err != nil { // one pooled connection
		t.Fatal(err)
	}
	wl, err := New(ctx, c, Config{Prefix: testPrefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wl.Close() })
	holder, err := openLocker(ctx, withParams(t, endpoint, "prefix", testPrefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })

	key := "queue/subscribed/" + randomHex(6)
	hm, _ := holder.NewMutex(key, dlock.WithTTL(ttl))
	if err := hm.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	wm, _ := wl.NewMutex(key, dlock.WithTTL(ttl))
	slow.Store(true)
	got := lockAsync(ctx, t, wm)
	// The waiter's first attempt has been refused; its SUBSCRIBE waits for
	// the slow dial.
	time.Sleep(ttl / 8)
	if err := hm.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	at, ok := <-got
	if !ok {
		return
	}
	defer func() { _ = wm.Unlock(ctx) }()
	left := time.Until(wm.Lease().Expires) + time.Since(at)
	// Granted at the release, the hold would have had about ttl/3 left.
	if left < ttl/2 {
		t.Fatalf("waiter's hold has %v of its %v lease left when Lock returned; want at least %v", left, ttl, ttl/2)
	}
}
