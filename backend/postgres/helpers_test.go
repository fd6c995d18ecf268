package postgres

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// env is one test's private lease table on the shared server.
type env struct {
	endpoint string // DLOCK_POSTGRES_URL
	table    string // unique to this test run
	raw      string // endpoint with table=
	admin    *pgxpool.Pool
}

// newEnv gives t a table no other test run uses, dropped when t ends.
func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{endpoint: testenv.Endpoint(t, "DLOCK_POSTGRES_URL"), table: testenv.Unique(t, "dlock_test")}
	e.raw = withParams(t, e.endpoint, "table", e.table)
	admin, err := pgxpool.New(context.Background(), e.endpoint)
	if err != nil {
		t.Fatalf("admin pool: %v", err)
	}
	e.admin = admin
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n := newNames("public", e.table)
		_, _ = admin.Exec(ctx, `DROP TABLE IF EXISTS `+n.tableQ)
		_, _ = admin.Exec(ctx, `DROP SEQUENCE IF EXISTS `+n.seqQ)
		_, _ = admin.Exec(ctx, `DROP TABLE IF EXISTS `+n.recordsQ)
		admin.Close()
	})
	return e
}

// names of the env's table (the test role's current schema is public).
func (e *env) names() names { return newNames("public", e.table) }

// withParams adds query parameters to a backend URL.
func withParams(t testing.TB, raw string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("endpoint %q: %v", raw, err)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// openLocker opens a Locker on raw with a pool of its own.
func openLocker(ctx context.Context, raw string, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := openRaw(ctx, raw)
	if err != nil {
		return nil, err
	}
	return lockerOver(d, opts)
}

func openRaw(ctx context.Context, raw string) (*pgDriver, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	return openDriver(ctx, u)
}

// locker opens a Locker on the env's table, closed when t ends.
func (e *env) locker(t testing.TB, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := openLocker(testenv.Context(t, 30*time.Second), e.raw, opts...)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// driver opens a bare driver on the env's table, closed when t ends.
func (e *env) driver(t testing.TB) *pgDriver {
	t.Helper()
	d, err := openRaw(testenv.Context(t, 30*time.Second), e.raw)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func mustMutex(t testing.TB, l *dlock.Locker, key string, opts ...dlock.Option) *dlock.Mutex {
	t.Helper()
	m, err := l.NewMutex(key, opts...)
	if err != nil {
		t.Fatalf("NewMutex(%q): %v", key, err)
	}
	return m
}
