package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// watchEnv is a driver that waits (named, so its connections can be found
// on the server), one that holds, and an admin client.
type watchEnv struct {
	waiter, holder *redisDriver
	admin          goredis.UniversalClient
	name           string // client name of the waiter's connections
}

func newWatchEnv(t *testing.T, endpoint string) *watchEnv {
	t.Helper()
	e := &watchEnv{name: "dlock-watch-test-" + randomHex(6)}
	raw := withParams(t, endpoint, "prefix", testPrefix)
	open := func(raw string) *redisDriver {
		u, _ := url.Parse(raw)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		d, err := openDriver(ctx, u, newClient)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	e.waiter = open(withParams(t, raw, "client_name", e.name))
	e.holder = open(raw)
	e.admin = adminClient(t, raw)
	return e
}

// node returns the client of the server that serves channel's subscribers.
func (e *watchEnv) node(ctx context.Context, t *testing.T, channel string) goredis.Cmdable {
	if cc, ok := e.admin.(*goredis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return e.admin
}

// subscribers counts the server's subscribers of channel.
func (e *watchEnv) subscribers(ctx context.Context, t *testing.T, channel string) int64 {
	t.Helper()
	node := e.node(ctx, t, channel)
	var m map[string]int64
	var err error
	if e.waiter.publish == redislua.ShardedPublish {
		m, err = node.PubSubShardNumSub(ctx, channel).Result()
	} else {
		m, err = node.PubSubNumSub(ctx, channel).Result()
	}
	if err != nil {
		t.Fatal(err)
	}
	return m[channel]
}

func (e *watchEnv) waitSubscribers(ctx context.Context, t *testing.T, channel string, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := e.subscribers(ctx, t, channel)
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("channel %s has %d subscribers; want %d", channel, n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cycle takes and releases key through the holder, publishing a release.
func (e *watchEnv) cycle(ctx context.Context, t *testing.T, key string) {
	t.Helper()
	h, err := e.holder.TryAcquire(ctx, driver.Request{Key: key, TTL: 30 * time.Second, Owner: randomHex(16)})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := e.holder.Release(ctx, h); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func received(w driver.Watch) (got, open bool) {
	select {
	case _, ok := <-w.Changed():
		return true, ok
	case <-time.After(5 * time.Second):
		return false, true
	}
}

// Watch returns with the subscription confirmed: a release right after it
// is seen. Two watches of one key share one subscription, which goes away
// with the last of them.
func TestWatchSharedSubscription(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		e := newWatchEnv(t, endpoint)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		key := "watch/" + randomHex(6)
		channel := keyNames(testPrefix, key).channel

		w1, err := e.waiter.Watch(ctx, key)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		e.cycle(ctx, t, key)
		if got, open := received(w1); !got || !open {
			t.Fatal("a release right after Watch returned was not seen")
		}
		w2, err := e.waiter.Watch(ctx, key)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		if n := e.subscribers(ctx, t, channel); n != 1 {
			t.Fatalf("two watches of one key: %d subscriptions on the server; want 1", n)
		}
		e.cycle(ctx, t, key)
		for i, w := range []driver.Watch{w1, w2} {
			if got, open := received(w); !got || !open {
				t.Fatalf("watch %d missed the release", i+1)
			}
		}
		_ = w1.Close()
		if n := e.subscribers(ctx, t, channel); n != 1 {
			t.Fatalf("after closing one of two watches: %d subscriptions; want 1", n)
		}
		e.cycle(ctx, t, key)
		if got, open := received(w2); !got || !open {
			t.Fatal("the remaining watch missed the release")
		}
		_ = w2.Close()
		e.waitSubscribers(ctx, t, channel, 0)

		// Subscribe again on the same connection after unsubscribing.
		w3, err := e.waiter.Watch(ctx, key)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		e.cycle(ctx, t, key)
		if got, open := received(w3); !got || !open {
			t.Fatal("a watch made after unsubscribing missed the release")
		}
		_ = w3.Close()

		cctx, ccancel := context.WithCancel(ctx)
		ccancel()
		if _, err := e.waiter.Watch(cctx, key); !errors.Is(err, context.Canceled) {
			t.Fatalf("Watch with a cancelled context: %v", err)
		}
		e.waitSubscribers(ctx, t, channel, 0)
	})
}

// When the pub/sub connection breaks, the watches on it are closed, and a
// new Watch works on a new connection.
func TestWatchConnectionBreaks(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		e := newWatchEnv(t, endpoint)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		key := "watchbreak/" + randomHex(6)
		channel := keyNames(testPrefix, key).channel
		w, err := e.waiter.Watch(ctx, key)
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		if n := e.killPubSub(ctx, t, channel); n != 1 {
			t.Fatalf("found %d pub/sub connections of the waiter; want 1", n)
		}
		if got, open := received(w); !got || open {
			t.Fatalf("after the connection was killed: received=%v open=%v; want the watch closed", got, open)
		}
		_ = w.Close()
		w, err = e.waiter.Watch(ctx, key)
		if err != nil {
			t.Fatalf("Watch after the break: %v", err)
		}
		defer w.Close()
		e.cycle(ctx, t, key)
		if got, open := received(w); !got || !open {
			t.Fatal("the watch made after the break missed the release")
		}
	})
}

// killPubSub kills the waiter's pub/sub connections on channel's server.
func (e *watchEnv) killPubSub(ctx context.Context, t *testing.T, channel string) int {
	t.Helper()
	node := e.node(ctx, t, channel)
	list, err := node.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(list, "\n") {
		f := parseClientLine(line)
		if f["name"] != e.name || !strings.Contains(f["flags"], "P") {
			continue
		}
		if err := node.ClientKillByFilter(ctx, "ID", f["id"]).Err(); err != nil {
			t.Fatal(err)
		}
		killed++
	}
	return killed
}

// parseClientLine reads one line of CLIENT LIST ("id=3 addr=... flags=P ...").
func parseClientLine(line string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Fields(line) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// Many goroutines watching and closing a few keys at once: every Watch is
// confirmed, and when all are closed no subscription is left on the server.
func TestWatchConcurrent(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		e := newWatchEnv(t, endpoint)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		keys := make([]string, 4)
		for i := range keys {
			keys[i] = "watchmany/" + randomHex(6)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					w, err := e.waiter.Watch(ctx, keys[(g+i)%len(keys)])
					if err != nil {
						errs <- err
						return
					}
					if i%5 == 0 {
						time.Sleep(time.Millisecond)
					}
					_ = w.Close()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Watch: %v", err)
		}
		for _, k := range keys {
			e.waitSubscribers(ctx, t, keyNames(testPrefix, k).channel, 0)
		}
		// The connection is still in order: a new watch sees a release.
		w, err := e.waiter.Watch(ctx, keys[0])
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Close()
		e.cycle(ctx, t, keys[0])
		if got, open := received(w); !got || !open {
			t.Fatal("a watch after the churn missed the release")
		}
	})
}
