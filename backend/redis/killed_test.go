package redis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/redislua"
)

// killedOwner is the description the helper process waits with.
const killedOwner = "killed waiter"

// killedTTL is the helper's lease, and so how long its queue entry lives
// after its last refresh: long, so that no entry or lease running out can
// explain what the tests see.
const killedTTL = 30 * time.Second

// TestMain runs this test binary as the helper process of the killed-waiter
// tests when asked to, and the tests otherwise.
func TestMain(m *testing.M) {
	if raw := os.Getenv("DLOCK_QUEUE_HELPER_URL"); raw != "" {
		queueHelperWaiter(raw, os.Getenv("DLOCK_QUEUE_HELPER_KEY"), os.Getenv("DLOCK_QUEUE_HELPER_TTL"),
			os.Getenv("DLOCK_QUEUE_HELPER_PERMITS"))
	}
	os.Exit(m.Run())
}

// queueHelperWaiter waits for key (a Mutex, or with permits a Semaphore of
// that many permits) until it is killed.
func queueHelperWaiter(raw, key, ttlText, permits string) {
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	ttl, err := time.ParseDuration(ttlText)
	if err != nil {
		fail(err)
	}
	l, err := openLocker(ctx, raw, dlock.WithTTL(ttl), dlock.WithOwner(killedOwner))
	if err != nil {
		fail(err)
	}
	if permits != "" {
		n, err := strconv.Atoi(permits)
		if err != nil {
			fail(err)
		}
		s, err := l.NewSemaphore(key, n)
		if err == nil {
			err = s.Lock(ctx)
		}
		fail(fmt.Errorf("Acquire returned %v before the helper was killed", err))
	}
	m, err := l.NewMutex(key)
	if err == nil {
		err = m.Lock(ctx)
	}
	fail(fmt.Errorf("Lock returned %v before the helper was killed", err))
}

// startKilledWaiter starts the helper process waiting on key (permits ""
// for a Mutex), waits until it has queued on every one of keys (the keys
// it waits on: key, or the semaphore's permit slots), kills it (SIGKILL:
// no dequeue, no Close), and returns once the server has seen its
// connections close: nobody is subscribed to its inbox on any of keys any
// more, while its queue entries stay, live for killedTTL. This is the
// case the server can tell: the waiter can no longer hear a grant.
func startKilledWaiter(ctx context.Context, t *testing.T, raw, endpoint, key, permits string, l *dlock.Locker, keys ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DLOCK_QUEUE_HELPER_URL="+raw, "DLOCK_QUEUE_HELPER_KEY="+key,
		"DLOCK_QUEUE_HELPER_TTL="+killedTTL.String(), "DLOCK_QUEUE_HELPER_PERMITS="+permits)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	admin := adminClient(t, endpoint)
	var inboxes []string
	for _, k := range keys {
		waitWaiters(ctx, t, l, k, 1)
		inbox := queuedInbox(ctx, t, admin, k, killedOwner)
		// It queued only once subscribed (see Acquire).
		if n := subscribers(ctx, t, admin, inbox); n != 1 {
			t.Fatalf("%d subscribers on the queued helper's inbox %s; want 1", n, inbox)
		}
		inboxes = append(inboxes, inbox)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, inbox := range inboxes {
		for subscribers(ctx, t, admin, inbox) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the server still counts a subscriber on the killed helper's inbox %s", inbox)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, k := range keys {
		waitWaiters(ctx, t, l, k, 1) // its entry is still in line
	}
}

// queuedInbox returns the inbox channel of the waiter queued for key whose
// description contains desc.
func queuedInbox(ctx context.Context, t *testing.T, admin goredis.UniversalClient, key, desc string) string {
	t.Helper()
	n := keyNames(testPrefix, key)
	entries, err := admin.HGetAll(ctx, n.deadlines).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", n.deadlines, err)
	}
	for _, e := range entries {
		// "deadline:ttl:inbox:attempt:meta" (queue.lua)
		if f := strings.SplitN(e, ":", 5); len(f) == 5 && strings.Contains(f[4], desc) {
			return redislua.InboxChannel(n.channel, f[2])
		}
	}
	t.Fatalf("no queue entry of %q for %s: %v", desc, key, entries)
	return ""
}

// subscribers returns how many connections the server counts on channel:
// sharded subscribers on a Cluster's master of its slot, else classic ones.
func subscribers(ctx context.Context, t *testing.T, admin goredis.UniversalClient, channel string) int64 {
	t.Helper()
	var (
		n   map[string]int64
		err error
	)
	if c, ok := admin.(*goredis.ClusterClient); ok {
		node, merr := c.MasterForKey(ctx, channel)
		if merr != nil {
			t.Fatal(merr)
		}
		n, err = node.PubSubShardNumSub(ctx, channel).Result()
	} else {
		n, err = admin.PubSubNumSub(ctx, channel).Result()
	}
	if err != nil {
		t.Fatalf("PUBSUB NUMSUB %s: %v", channel, err)
	}
	return n[channel]
}

// A waiter whose process dies in the queue (SIGKILL: no dequeue, no
// Close) is not handed the lock: the release finds nobody subscribed to
// its inbox, drops its entry and grants the lock to the live waiter behind
// it in the same script, with a greater token. Before, the dead waiter was
// granted the lock and the key stayed blocked for a whole lease more.
func TestQueueKilledWaiter(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		raw := withParams(t, endpoint, "prefix", testPrefix)
		key := "queue/killed/" + randomHex(6)
		holder, err := openLocker(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Close()
		hm, _ := holder.NewMutex(key)
		if err := hm.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		startKilledWaiter(ctx, t, raw, endpoint, key, "", holder, key)

		next, err := openLocker(ctx, raw, dlock.WithOwner("live waiter"))
		if err != nil {
			t.Fatal(err)
		}
		defer next.Close()
		nm, _ := next.NewMutex(key)
		lctx, lcancel := context.WithCancel(ctx)
		defer lcancel()
		got := make(chan error, 1)
		go func() { got <- nm.Lock(lctx) }()
		waitWaiters(ctx, t, holder, key, 2) // behind the dead waiter
		before := hm.Token()
		if err := hm.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		// The release script decided: read who it gave the lock to.
		info, err := holder.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if !info.Held || info.Owner != "live waiter" {
			t.Fatalf("after the release the key is held=%v by %q; want it granted to the live waiter, not to the killed one", info.Held, info.Owner)
		}
		if info.Waiters != 0 {
			t.Fatalf("%d waiters left; want the killed waiter's entry dropped", info.Waiters)
		}
		if err := <-got; err != nil {
			t.Fatalf("Lock behind a killed waiter: %v", err)
		}
		defer func() { _ = nm.Unlock(ctx) }()
		if tok := nm.Token(); tok <= before || tok != info.Token {
			t.Fatalf("live waiter's token %d (Inspect %d); want above the holder's %d", tok, info.Token, before)
		}
	})
}

// A semaphore waiter queues on every permit slot: when its process dies,
// neither slot is granted to it. The releases of both permits go to the
// live waiter and to nobody (the slot is free at once), not both to the
// killed waiter.
func TestSemaphoreKilledWaiter(t *testing.T) {
	eachTopology(t, func(t *testing.T, endpoint string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		raw := withParams(t, endpoint, "prefix", testPrefix)
		key := "queue/semkilled/" + randomHex(6)
		const permits = 2
		sem := func(desc string) (*dlock.Locker, *dlock.Semaphore) {
			l, err := openLocker(ctx, raw, dlock.WithOwner(desc))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			s, err := l.NewSemaphore(key, permits)
			if err != nil {
				t.Fatal(err)
			}
			return l, s
		}
		la, a := sem("holder a")
		_, b := sem("holder b")
		for _, s := range []*dlock.Semaphore{a, b} {
			if err := s.Lock(ctx); err != nil {
				t.Fatalf("Acquire: %v", err)
			}
		}
		slots := []string{key + "#permit/0", key + "#permit/1"}
		startKilledWaiter(ctx, t, raw, endpoint, key, strconv.Itoa(permits), la, slots...)

		_, c := sem("live waiter")
		got := make(chan error, 1)
		go func() { got <- c.Lock(ctx) }()
		for _, slot := range slots {
			waitWaiters(ctx, t, la, slot, 2) // behind the dead waiter on both
		}
		heldBy := func(slot string) dlock.Info {
			t.Helper()
			info, err := la.Inspect(ctx, slot)
			if err != nil {
				t.Fatalf("Inspect %s: %v", slot, err)
			}
			if strings.Contains(info.Owner, killedOwner) {
				t.Fatalf("permit slot %s was granted to the killed waiter", slot)
			}
			return info
		}
		aSlot, bSlot := a.PermitKey(), b.PermitKey()
		if err := a.Unlock(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if info := heldBy(aSlot); !info.Held || !strings.Contains(info.Owner, "live waiter") {
			t.Fatalf("after the release, slot %s is held=%v by %q; want the live waiter", aSlot, info.Held, info.Owner)
		}
		if err := <-got; err != nil {
			t.Fatalf("Acquire behind a killed waiter: %v", err)
		}
		defer func() { _ = c.Unlock(ctx) }()
		if c.PermitKey() != aSlot {
			t.Fatalf("live waiter holds %s; want the released %s", c.PermitKey(), aSlot)
		}
		// The other permit: its queue holds only the dead entry (the live
		// waiter left it when it got the first), so its release frees it.
		if err := b.Unlock(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if info := heldBy(bSlot); info.Held || info.Waiters != 0 {
			t.Fatalf("after the release, slot %s is held=%v by %q with %d waiters; want it free", bSlot, info.Held, info.Owner, info.Waiters)
		}
		_, d := sem("newcomer")
		if err := d.TryLock(ctx); err != nil {
			t.Fatalf("TryAcquire of the freed permit: %v", err)
		}
		if d.PermitKey() != bSlot {
			t.Fatalf("newcomer holds %s; want the freed %s", d.PermitKey(), bSlot)
		}
		if err := d.Unlock(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})
}

// A release asks whether a waiter hears it only where the Lockers
// subscribe on the server that runs it: not with classic pub/sub on a
// Cluster (PUBLISH counts the receivers of one node), nor with a Cluster
// client that subscribes on replicas.
func TestCanTell(t *testing.T) {
	standalone := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"})
	defer standalone.Close()
	cluster := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer cluster.Close()
	replicas := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, RouteRandomly: true})
	defer replicas.Close()
	for _, c := range []struct {
		name    string
		client  goredis.UniversalClient
		sharded bool
		want    bool
	}{
		{"standalone or Sentinel", standalone, false, true},
		{"Cluster, sharded pub/sub", cluster, true, true},
		{"Cluster, classic pub/sub", cluster, false, false},
		{"Cluster read from replicas", replicas, true, false},
	} {
		if got := canTell(c.client, c.sharded); got != c.want {
			t.Errorf("%s: canTell %v; want %v", c.name, got, c.want)
		}
	}
}
