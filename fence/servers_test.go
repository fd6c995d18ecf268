package fence_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock/internal/testenv"
)

// unique returns a name no other test run uses, for tables and key
// prefixes on the shared servers.
func unique(t testing.TB, base string) string {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base + "_" + hex.EncodeToString(b)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openPostgres connects to the postgres topology (DLOCK_POSTGRES_URL).
func openPostgres(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", testenv.Endpoint(t, "DLOCK_POSTGRES_URL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(testCtx(t)); err != nil {
		t.Fatalf("postgres: %v", err)
	}
	return db
}

// dropAfter drops table when the test ends.
func dropAfter(t testing.TB, db *sql.DB, table string) {
	t.Cleanup(func() {
		if _, err := db.Exec(`DROP TABLE IF EXISTS "` + strings.ReplaceAll(table, `"`, `""`) + `"`); err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
	})
}

// openRedis connects to the redis topology (DLOCK_REDIS_URL).
func openRedis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Endpoint(t, "DLOCK_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	if err := c.Ping(testCtx(t)).Err(); err != nil {
		t.Fatalf("redis: %v", err)
	}
	return c
}

// cleanRedis deletes the keys under prefix when the test ends.
func cleanRedis(t testing.TB, c *redis.Client, prefix string) {
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
}

// openEtcd connects to the etcd topology (DLOCK_ETCD_URL, etcd://host:port).
func openEtcd(t testing.TB) *clientv3.Client {
	t.Helper()
	u, err := url.Parse(testenv.Endpoint(t, "DLOCK_ETCD_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(u.Host, ","),
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Get(ctx, "health"); err != nil {
		t.Fatalf("etcd: %v", err)
	}
	return c
}

// cleanEtcd deletes the keys under prefix when the test ends.
func cleanEtcd(t testing.TB, c *clientv3.Client, prefix string) {
	t.Cleanup(func() {
		if _, err := c.Delete(context.Background(), prefix, clientv3.WithPrefix()); err != nil {
			t.Errorf("etcd cleanup: %v", err)
		}
	})
}
