package movetest

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/consul"
	_ "github.com/dlock-go/dlock/backend/etcd"
	_ "github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/memory"
	_ "github.com/dlock-go/dlock/backend/postgres"
	_ "github.com/dlock-go/dlock/backend/redis"
	_ "github.com/dlock-go/dlock/backend/redis/rediscluster"
	_ "github.com/dlock-go/dlock/backend/redlock"
	_ "github.com/dlock-go/dlock/backend/zookeeper"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/move/movetest"
	"github.com/dlock-go/dlock/internal/testenv"
)

// namespaced gives raw a namespace of this test's own (a key prefix; on
// PostgreSQL a table of these tests, whose record Commit clears): the
// commit record is one per namespace, and one left by an
// earlier run would commit this run's move before it starts.
func namespaced(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.Unique(t, "move")
	q := u.Query()
	switch u.Scheme {
	case "redis":
		q.Set("prefix", name)
	case "postgres", "postgresql":
		q.Set("table", "dlock_move_test") // one table; Commit clears its record
	default:
		u.Path = "/" + name
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// stores returns a Redis URL and an etcd URL under a prefix of this test's.
func stores(t *testing.T) (redisURL, etcdURL string) {
	r := testenv.Endpoint(t, "DLOCK_REDIS_URL")
	e := testenv.Endpoint(t, "DLOCK_ETCD_URL")
	p := testenv.Unique(t, "move")
	return r + "?prefix=" + p, e + "/" + p
}

// Redis tokens are microseconds since 1970, etcd's revisions: without the
// lift, the first etcd token would fall far below the last Redis one.
func TestTokensRedisToEtcd(t *testing.T) {
	r, e := stores(t)
	movetest.RunTokens(t, r, e, "k/", dlock.WithTTL(3*time.Second))
}

// The other way round: etcd's small revisions below Redis's clock.
func TestTokensEtcdToRedis(t *testing.T) {
	r, e := stores(t)
	movetest.RunTokens(t, e, r, "k/", dlock.WithTTL(3*time.Second))
}

// Memory's clock-based tokens to etcd's revisions.
func TestTokensMemToEtcd(t *testing.T) {
	_, e := stores(t)
	movetest.RunTokens(t, "mem://"+testenv.Unique(t, "x"), e, "k/", dlock.WithTTL(3*time.Second))
}

// TestLossOnEitherStoreRedisEtcd breaks the key on Redis, then on etcd:
// each time the C1 hold's Done closes.
func TestLossOnEitherStoreRedisEtcd(t *testing.T) {
	r, e := stores(t)
	for _, side := range []string{r, e} {
		ctx := testenv.Context(t, 30*time.Second)
		l := movetest.Open(t, movetest.C1(r, e), dlock.WithTTL(2*time.Second))
		m, _ := l.NewMutex("lossy")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		plain := movetest.Open(t, side)
		if info, err := plain.Break(ctx, "lossy"); err != nil || !info.Held {
			t.Fatalf("Break on %s: %+v, %v", side, info, err)
		}
		select {
		case <-m.Done():
		case <-ctx.Done():
			t.Fatalf("hold still live after its hold on %s was broken", side)
		}
		_ = m.Unlock(ctx)
		_ = l.Close()
	}
}

// TestElectionAcrossMove: an Election's leader, as Leader and Observe see
// it through each configuration, has the term its leader holds, and terms
// increase across the commit.
func TestElectionAcrossMove(t *testing.T) {
	r, e := stores(t)
	ctx := testenv.Context(t, 60*time.Second)
	c1 := movetest.Open(t, movetest.C1(r, e), dlock.WithTTL(3*time.Second))
	el, err := c1.NewElection("el")
	if err != nil {
		t.Fatal(err)
	}
	obs, err := c1.NewElection("el")
	if err != nil {
		t.Fatal(err)
	}
	ch, err := obs.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Campaign(ctx, "before"); err != nil {
		t.Fatal(err)
	}
	first := el.Token()
	got := <-ch
	if got.Value != "before" || got.Token != first {
		t.Fatalf("observed %+v, want before/%d", got, first)
	}
	if err := el.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	movetest.Commit(t, r, e)
	c2 := movetest.Open(t, movetest.C2(e), dlock.WithTTL(3*time.Second))
	el2, _ := c2.NewElection("el")
	if err := el2.Campaign(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	if el2.Token() <= first {
		t.Fatalf("term after the commit %d, not above %d", el2.Token(), first)
	}
	for got = range ch {
		if got.Value == "after" {
			break
		}
	}
	if got.Token != el2.Token() {
		t.Fatalf("observed through C1 %+v, want term %d", got, el2.Token())
	}
	ld, err := c1.NewElection("el")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := ld.Leader(ctx); err != nil || l.Value != "after" || l.Token != el2.Token() {
		t.Fatalf("Leader through C1: %+v, %v; want after/%d", l, err, el2.Token())
	}
}

// TestConformanceRedisToEtcd runs the conformance suite on the move's
// first configuration, Redis then etcd.
func TestConformanceRedisToEtcd(t *testing.T) {
	r, e := stores(t)
	u := movetest.C1(r, e)
	conformance.Run(t, conformance.Harness{
		NewLocker: func(ctx context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return dlock.Open(ctx, u, opts...)
		},
		NewDriver: func(ctx context.Context) (driver.Locker, error) { return dlock.OpenDriver(ctx, u) },
		BreakLease: func(ctx context.Context, key string) error {
			d, err := dlock.OpenDriver(ctx, u)
			if err != nil {
				return err
			}
			defer d.Close()
			_, err = d.(driver.Inspector).Break(ctx, key)
			return err
		},
		Unreachable: func(ctx context.Context, addr string) (*dlock.Locker, error) {
			return dlock.Open(ctx, movetest.C1(r, "etcd://"+addr+"/x"))
		},
		URL: u,
		TTL: 2 * time.Second,
	})
}

// TestTokenCeiling: every backend's ceiling is at least the token it has
// just issued.
func TestTokenCeiling(t *testing.T) {
	for _, name := range []string{"DLOCK_REDIS_URL", "DLOCK_REDLOCK_URL", "DLOCK_REDIS_CLUSTER_URL", "DLOCK_ETCD_URL", "DLOCK_ZK_URL", "DLOCK_CONSUL_URL", "DLOCK_POSTGRES_URL"} {
		t.Run(name, func(t *testing.T) {
			raw := testenv.Endpoint(t, name)
			ctx := testenv.Context(t, 30*time.Second)
			l := movetest.Open(t, raw)
			m, _ := l.NewMutex(testenv.Unique(t, "ceiling"))
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			defer m.Unlock(ctx)
			d, err := dlock.OpenDriver(ctx, raw)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			c, err := d.(driver.TokenCeiling).TokenCeiling(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c < uint64(m.Token()) {
				t.Fatalf("ceiling %d below the token %d just issued", c, m.Token())
			}
		})
	}
}

// The pairs of the issue: Redis to ZooKeeper, to PostgreSQL, to Consul,
// and file to Redis.
func TestTokensOtherPairs(t *testing.T) {
	r, _ := stores(t)
	for _, tc := range []struct {
		name, env string
		opts      []dlock.Option
	}{
		{"redis-zk", "DLOCK_ZK_URL", nil},
		{"redis-postgres", "DLOCK_POSTGRES_URL", []dlock.Option{dlock.WithTTL(3 * time.Second)}},
		{"redis-consul", "DLOCK_CONSUL_URL", []dlock.Option{dlock.WithTTL(10 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			movetest.RunTokens(t, r, namespaced(t, testenv.Endpoint(t, tc.env)), "k/", tc.opts...)
		})
	}
	t.Run("file-redis", func(t *testing.T) {
		movetest.RunTokens(t, "file://"+t.TempDir(), r, "k/", dlock.WithTTL(3*time.Second))
	})
}

// TestDisjointTTLs: ZooKeeper with a 2s session honours only 2s, Consul
// 10s to 24h: a move between them is refused when it is opened.
func TestDisjointTTLs(t *testing.T) {
	z := testenv.Endpoint(t, "DLOCK_ZK_URL") + "/" + testenv.Unique(t, "move") + "?session_timeout=2s"
	c := testenv.Endpoint(t, "DLOCK_CONSUL_URL") + "/" + testenv.Unique(t, "move")
	ctx := testenv.Context(t, 30*time.Second)
	l, err := dlock.Open(ctx, movetest.C1(z, c))
	if err == nil {
		_ = l.Close()
		t.Fatal("a move between stores of disjoint TTLs opened")
	}
	if !errors.Is(err, dlock.ErrInvalidURL) || !errors.Is(err, dlock.ErrInvalidOption) || !strings.Contains(err.Error(), "no common TTL") {
		t.Fatalf("error %v; want ErrInvalidURL and ErrInvalidOption, saying there is no common TTL", err)
	}
}
