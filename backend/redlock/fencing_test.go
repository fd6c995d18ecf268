package redlock_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
)

// TestFencingCounterexample replays, on the real instances, the history
// that breaks "token = largest per-instance counter + 1": counters
// a=0 b=10 c=50 d=60 e=60; A wins {a,d,e} and gets 61; after A, B wins
// {a,b,c} and would get max(1,10,50)+1 = 51 < 61. The second phase writes
// A's token back to a, so B reads it there and gets more. The counters
// are all offset by a base an hour ahead of the servers' clocks, so that
// the clock floor of the acquire script plays no part.
func TestFencingCounterexample(t *testing.T) {
	ep := endpoint(t)
	hosts := hostsOf(t, ep)
	if len(hosts) != 5 {
		t.Fatalf("want the five-master topology, got %d hosts", len(hosts))
	}
	prefix := testPrefix()
	d := openDriver(t, withParams(t, ep, "prefix", prefix, "timeout", "2s"))
	l, err := dlock.NewLocker(d, dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	admin := adminClients(t, hosts)
	a, b, c, dd, e := admin[0], admin[1], admin[2], admin[3], admin[4]
	const key = "counterexample"
	now, err := a.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	base := uint64(now.UnixMicro()) + uint64(time.Hour/time.Microsecond)
	at := func(n uint64) string { return strconv.FormatUint(base+n, 10) }
	lockKey, counterKey := prefix+"l:"+key, prefix+"t:"+key
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	set := func(cl *redis.Client, k, v string, ttl time.Duration) {
		t.Helper()
		if err := cl.Set(ctx, k, v, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	counter := func(cl *redis.Client) string {
		t.Helper()
		v, err := cl.Get(ctx, counterKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for cl, v := range map[*redis.Client]string{a: at(0), b: at(10), c: at(50), dd: at(60), e: at(60)} {
		set(cl, counterKey, v, 0)
	}
	// Someone else holds the lock on b and c: A can only win {a,d,e}.
	set(b, lockKey, "someone-else", time.Minute)
	set(c, lockKey, "someone-else", time.Minute)

	mA, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := mA.TryLock(ctx); err != nil {
		t.Fatalf("A: TryLock with {a,d,e} free: %v", err)
	}
	tokA := mA.Token()
	if tokA != dlock.Token(base+61) {
		t.Errorf("A's token = base+%d; want base+61 = max(a=1, d=61, e=61)", uint64(tokA)-base)
	}
	if got := counter(a); got != at(61) {
		t.Fatalf("counter on a after A = %s; want 61, written back by phase 2 (phase 1 left it at 1)", got)
	}
	if err := mA.Unlock(ctx); err != nil {
		t.Fatalf("A: Unlock: %v", err)
	}
	for _, cl := range []*redis.Client{b, c} { // not A's: untouched by A's release
		if v, _ := cl.Get(ctx, lockKey).Result(); v != "someone-else" {
			t.Fatalf("A's release changed another owner's lock: %q", v)
		}
	}

	// Now b and c are free and d, e are held elsewhere: B can only win
	// {a,b,c}, whose counters are 61, 10, 50.
	for _, cl := range []*redis.Client{b, c} {
		if err := cl.Del(ctx, lockKey).Err(); err != nil {
			t.Fatal(err)
		}
	}
	set(dd, lockKey, "someone-else", time.Minute)
	set(e, lockKey, "someone-else", time.Minute)
	mB, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := mB.TryLock(ctx); err != nil {
		t.Fatalf("B: TryLock with {a,b,c} free: %v", err)
	}
	defer func() { _ = mB.Unlock(ctx) }()
	tokB := mB.Token()
	t.Logf("A's token %d, B's token %d (the largest counter alone would have given B 51)", tokA, tokB)
	if tokB <= tokA {
		t.Fatalf("B's token %d is not greater than A's %d: tokens went back", tokB, tokA)
	}
	if tokB != dlock.Token(base+62) {
		t.Errorf("B's token = base+%d; want base+62 = max(a=62, b=11, c=51)", uint64(tokB)-base)
	}
	for name, cl := range map[string]*redis.Client{"a": a, "b": b, "c": c} {
		if got := counter(cl); got != at(62) {
			t.Errorf("counter on %s after B = %s; want base+62 = %s", name, got, at(62))
		}
	}
}
