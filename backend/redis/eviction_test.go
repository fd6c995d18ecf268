package redis

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

// A server whose maxmemory-policy may evict keys is refused unless the URL
// (or Config) allows it.
func TestEvictionPolicy(t *testing.T) {
	srv := startTempServer(t)
	admin := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
		if err := admin.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		l, err := dlock.Open(ctx, srv.url())
		if err == nil {
			_ = l.Close()
			t.Fatalf("Open with maxmemory-policy %s succeeded; want ErrEvictionPolicy", policy)
		}
		if !errors.Is(err, ErrEvictionPolicy) || errors.Is(err, dlock.ErrUnavailable) {
			t.Fatalf("Open with maxmemory-policy %s: %v; want ErrEvictionPolicy", policy, err)
		}
		if _, err := New(ctx, admin, Config{}); !errors.Is(err, ErrEvictionPolicy) {
			t.Fatalf("New with maxmemory-policy %s: %v; want ErrEvictionPolicy", policy, err)
		}
		l, err = dlock.Open(ctx, srv.url()+"?allow_eviction=true")
		if err != nil {
			t.Fatalf("Open with allow_eviction=true: %v", err)
		}
		_ = l.Close()
		l, err = New(ctx, admin, Config{AllowEviction: true})
		if err != nil {
			t.Fatalf("New with AllowEviction: %v", err)
		}
		_ = l.Close()
	}
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := dlock.Open(ctx, srv.url())
	if err != nil {
		t.Fatalf("Open with noeviction: %v", err)
	}
	_ = l.Close()
}

// A maxmemory-policy changed after open is noticed: a renewal that finds
// the key evicted says that eviction is the likely cause (the error
// matches ErrEvictionPolicy as well as ErrLockLost), and the next acquire
// reads the policy again and refuses the server.
func TestEvictionPolicySetAfterOpen(t *testing.T) {
	srv := startTempServer(t)
	admin := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := openLocker(ctx, srv.url()+"?prefix=evict", dlock.WithTTL(time.Minute), dlock.WithAutoRenew(false))
	if err != nil {
		t.Fatalf("Open with noeviction: %v", err)
	}
	defer l.Close()
	m, err := l.NewMutex("k")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	if err := admin.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	evict(ctx, t, admin, LockKey("evict", "k"))

	err = m.Renew(ctx)
	t.Logf("Renew after the eviction: %v", err)
	if !errors.Is(err, dlock.ErrLockLost) || !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("Renew after the lock key was evicted: %v; want ErrLockLost and ErrEvictionPolicy naming allkeys-lru", err)
	}

	m2, err := l.NewMutex("other")
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); !errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("TryLock after the eviction: %v; want ErrEvictionPolicy", err)
	}
	if n := admin.Exists(ctx, LockKey("evict", "other")).Val(); n != 0 {
		t.Fatal("the refused acquire left its lock key behind")
	}

	// Fixed by the operator: locks are granted again.
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after noeviction was set again: %v", err)
	}
	_ = m2.Unlock(ctx)
}

// A policy changed after open with nothing evicted yet is noticed by the
// periodic re-check of an acquire (shortened here from its minute).
func TestEvictionPolicyRecheckedPeriodically(t *testing.T) {
	srv := startTempServer(t)
	admin := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(srv.url() + "?prefix=evict")
	if err != nil {
		t.Fatal(err)
	}
	d, err := openDriver(ctx, u, newClient)
	if err != nil {
		t.Fatal(err)
	}
	l, err := lockerOver(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, err := l.NewMutex("k")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(ctx); err != nil {
		t.Fatalf("TryLock with noeviction: %v", err)
	}
	_ = m.Unlock(ctx)
	if err := admin.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	d.policy.mu.Lock()
	d.policy.every = time.Millisecond
	d.policy.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	if err := m.TryLock(ctx); !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), "volatile-lru") {
		t.Fatalf("TryLock after CONFIG SET maxmemory-policy volatile-lru: %v; want ErrEvictionPolicy", err)
	}
}

// A Sentinel failover to a replica whose policy may evict is noticed by
// the first acquire on the new primary.
func TestEvictionPolicyAfterFailover(t *testing.T) {
	primary, replica := startReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := replica.client().ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	sentinel := startSentinel(t, primary)
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.addr()})
	defer sc.Close()
	// The Sentinel learns of the replica from the primary's INFO.
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, _ := sc.Replicas(ctx, "mymaster").Result()
		if len(rs) == 1 && rs[0]["flags"] == "slave" && rs[0]["master-link-status"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel never saw the replica: %v", rs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := openMutex(ctx, t, "redis+sentinel://"+sentinel.addr()+"?master_name=mymaster&prefix=fo", "k")
	if err := m.TryLock(ctx); err != nil {
		t.Fatalf("TryLock on the primary (noeviction): %v", err)
	}
	_ = m.Unlock(ctx)

	if err := sc.Failover(ctx, "mymaster").Err(); err != nil {
		t.Fatalf("SENTINEL FAILOVER: %v", err)
	}
	for {
		addr, err := sc.GetMasterAddrByName(ctx, "mymaster").Result()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(replica.port) {
			newRole, _ := replica.client().Do(ctx, "ROLE").Slice()
			oldRole, _ := primary.client().Do(ctx, "ROLE").Slice()
			if len(newRole) > 0 && newRole[0] == "master" && len(oldRole) > 0 && oldRole[0] == "slave" {
				break
			}
		}
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("the replica was never promoted: %v %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The client moves to the new primary on its own; until it has, an
	// attempt may fail as unavailable (READONLY from the old one).
	for {
		err := m.TryLock(ctx)
		if errors.Is(err, ErrEvictionPolicy) {
			t.Logf("TryLock after the failover: %v", err)
			break
		}
		if err == nil {
			if replica.client().Exists(ctx, LockKey("fo", "k")).Val() == 1 {
				t.Fatal("TryLock on the new primary, whose maxmemory-policy is allkeys-lru, succeeded; want ErrEvictionPolicy")
			}
			// Granted by the old primary before it was turned into a
			// replica: not what this test is about.
			_ = m.Unlock(ctx)
			continue
		}
		if !errors.Is(err, dlock.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("TryLock after the failover: %v; want ErrEvictionPolicy", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// evict fills the server until key is evicted.
func evict(ctx context.Context, t *testing.T, admin *goredis.Client, key string) {
	t.Helper()
	used, err := strconv.ParseInt(parseInfo(admin.Info(ctx, "memory").Val())["used_memory"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+2<<20, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	defer admin.ConfigSet(context.WithoutCancel(ctx), "maxmemory", "0")
	filler := strings.Repeat("x", 64<<10)
	for i := 0; admin.Exists(ctx, key).Val() == 1; i++ {
		if i == 10_000 {
			t.Fatalf("%s still there after %d filler keys", key, i)
		}
		if err := admin.Set(ctx, "filler:"+strconv.Itoa(i), filler, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
