package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

func owner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func req(key string, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, TTL: ttl, Owner: owner()}
}

// via returns the env's URL with its host replaced by addr.
func (e *env) via(t testing.TB, addr string) string {
	u, err := url.Parse(e.raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

func (e *env) serverAddr(t testing.TB) string {
	u, err := url.Parse(e.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// A held key reports the holder's remaining lease from the server's clock.
func TestHeldRemaining(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	const ttl = 20 * time.Second
	if _, err := d.TryAcquire(ctx, req("k", ttl)); err != nil {
		t.Fatal(err)
	}
	_, err := d.TryAcquire(ctx, req("k", ttl))
	var held *driver.HeldError
	if !errors.As(err, &held) || !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held key: %v; want a *driver.HeldError", err)
	}
	if held.Remaining <= 0 || held.Remaining > ttl {
		t.Fatalf("Remaining = %v; want in (0, %v]", held.Remaining, ttl)
	}
}

// A renewal or release by a holder whose row was taken over, or removed,
// is ErrNotHeld and changes nothing.
func TestRenewTakenOrMissing(t *testing.T) {
	e := newEnv(t)
	d1, d2 := e.driver(t), e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	old, err := d1.TryAcquire(ctx, req("k", 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	next, err := d2.TryAcquire(ctx, req("k", time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire after expiry: %v", err)
	}
	if next.Token <= old.Token {
		t.Fatalf("takeover token %d not greater than %d", next.Token, old.Token)
	}
	if _, err := d1.Renew(ctx, old); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Renew of a taken-over hold: %v; want ErrNotHeld", err)
	}
	if err := d1.Release(ctx, old); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of a taken-over hold: %v; want ErrNotHeld", err)
	}
	if _, err := d1.TryAcquire(ctx, req("k", time.Minute)); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("the successor's lease did not survive: %v", err)
	}
	if _, err := d2.Renew(ctx, next); err != nil {
		t.Fatalf("successor's Renew: %v", err)
	}
	if _, err := e.admin.Exec(ctx, `DELETE FROM `+e.names().tableQ+` WHERE key_hash = $1`, keyHash("k")); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Renew(ctx, next); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Renew of a removed row: %v; want ErrNotHeld", err)
	}
	if err := d2.Release(ctx, next); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of a removed row: %v; want ErrNotHeld", err)
	}
}

// Dropped connections make calls fail with ErrUnavailable (transient: the
// hold is not lost), and once the server is reachable again the same hold
// renews; the watchdog of an auto-renewed hold rides it out the same way.
func TestDroppedConnectionIsUnavailable(t *testing.T) {
	e := newEnv(t)
	e.driver(t) // create the table directly, not through the proxy
	p := newDropProxy(t, e.serverAddr(t))
	raw := e.via(t, p.addr())
	pl, err := openLocker(testenv.Context(t, 30*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Close() })
	ctx := testenv.Context(t, time.Minute)
	m := mustMutex(t, pl, "k", dlock.WithTTL(time.Minute), dlock.WithAutoRenew(false))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	other := mustMutex(t, pl, "other", dlock.WithTTL(time.Minute))
	p.drop()
	err = m.Renew(ctx)
	if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Renew with the connections dropped: %v; want ErrUnavailable, not ErrLockLost", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = other.TryLock(tctx)
	cancel()
	if !errors.Is(err, dlock.ErrUnavailable) || other.Token() != 0 {
		t.Fatalf("TryLock with the connections dropped: %v (token %d); want ErrUnavailable", err, other.Token())
	}
	if isClosed(m.Done()) {
		t.Fatal("a transient failure ended the hold")
	}
	p.restore()
	// The pool may still hand out an idle connection that was dropped: that
	// attempt fails as unavailable too, and the next one gets through, as
	// the watchdog's retries would.
	for try := 1; ; try++ {
		err := m.Renew(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrLockLost) || try == DefaultMinConns+2 {
			t.Fatalf("Renew %d after the connections came back: %v", try, err)
		}
	}
	if err := m.Unlock(ctx); err != nil && (!errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrLockLost)) {
		t.Fatalf("Unlock: %v", err)
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// A server that accepts connections and never answers is ErrUnavailable
// once connect_timeout has passed, before the caller's context ends.
func TestOpenSilentServer(t *testing.T) {
	addr := conformance.SilentServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := runtime.NumGoroutine()
	l, err := dlock.Open(ctx, "postgres://dlock@"+addr+"/dlock?sslmode=disable&connect_timeout=1")
	defer waitGoroutines(t, base, "after a failed Open")
	if err == nil {
		_ = l.Close()
		t.Fatal("Open on a silent server succeeded")
	}
	if !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Open on a silent server: %v; want ErrUnavailable", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Open returned only when the context ended: %v", err)
	}
}

// Nothing listens: connection refused is ErrUnavailable too.
func TestOpenRefused(t *testing.T) {
	p := newDropProxy(t, "127.0.0.1:1")
	p.drop()
	ctx := testenv.Context(t, time.Minute)
	_, err := dlock.Open(ctx, "postgres://dlock@"+p.addr()+"/dlock?sslmode=disable")
	if !errors.Is(err, dlock.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("Open with connections refused: %v; want ErrUnavailable before the context ends", err)
	}
}

// A wrong password is the server's answer, not an outage.
func TestOpenBadPassword(t *testing.T) {
	e := newEnv(t)
	u, _ := url.Parse(e.raw)
	u.User = url.UserPassword("dlock", "wrong")
	_, err := dlock.Open(testenv.Context(t, time.Minute), u.String())
	if err == nil || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Open with a wrong password: %v; want a non-transient error", err)
	}
}

// An existing table of another shape is refused, and left alone.
func TestNotALockTable(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t, time.Minute)
	if _, err := e.admin.Exec(ctx, `CREATE TABLE `+e.names().tableQ+` (id int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Exec(ctx, `CREATE SEQUENCE `+e.names().seqQ); err != nil {
		t.Fatal(err)
	}
	_, err := openLocker(ctx, e.raw)
	if !errors.Is(err, ErrNotALockTable) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("open on a foreign table: %v; want ErrNotALockTable", err)
	}
}

// schema= puts the table in that schema, and New over a pool of the
// program's works on it; closing the Locker leaves the pool open.
func TestSchemaAndNew(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t, time.Minute)
	schema := testenv.Unique(t, "dlock_schema")
	if _, err := e.admin.Exec(ctx, `CREATE SCHEMA `+quote(schema)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.admin.Exec(context.Background(), `DROP SCHEMA `+quote(schema)+` CASCADE`) })
	sl, err := openLocker(ctx, withParams(t, e.raw, "schema", schema))
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	var reg *string
	if err := e.admin.QueryRow(ctx, `SELECT to_regclass($1)::text`, newNames(schema, e.table).tableQ).Scan(&reg); err != nil || reg == nil {
		t.Fatalf("table not created in schema %s: %v", schema, err)
	}
	pool, err := pgxpool.New(ctx, e.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	nl, err := New(ctx, pool, Config{Schema: schema, Table: e.table}, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	a, b := mustMutex(t, sl, "k"), mustMutex(t, nl, "k")
	pub := mustMutex(t, e.locker(t), "k")
	if err := a.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("same schema and table through New: %v; want ErrNotAcquired", err)
	}
	if err := pub.TryLock(ctx); err != nil {
		t.Fatalf("same table name in another schema: %v; want a separate lock", err)
	}
	if err := nl.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("the program's pool after Locker.Close: %v; want it open", err)
	}
}

func quote(s string) string { return `"` + s + `"` }

// Tokens keep increasing when the table and its sequence are dropped and
// created again: the sequence starts at the server's clock.
func TestTokensAfterRecreate(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t, time.Minute)
	d := e.driver(t)
	h, err := d.TryAcquire(ctx, req("k", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	if _, err := e.admin.Exec(ctx, `DROP TABLE `+e.names().tableQ); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.Exec(ctx, `DROP SEQUENCE `+e.names().seqQ); err != nil {
		t.Fatal(err)
	}
	d2 := e.driver(t)
	h2, err := d2.TryAcquire(ctx, req("k", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if h2.Token <= h.Token {
		t.Fatalf("token after the table was recreated %d; want greater than %d", h2.Token, h.Token)
	}
}

// The waiters of a Locker share one listening connection; a release wakes
// the watches of its key and only those.
func TestWatchShared(t *testing.T) {
	e := newEnv(t)
	app := testenv.Unique(t, "dlock_listen")
	raw := withParams(t, e.raw, "application_name", app)
	d, err := openRaw(testenv.Context(t, 30*time.Second), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	holder := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	h, err := holder.TryAcquire(ctx, req("a", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var ws []driver.Watch
	for _, k := range []string{"a", "a", "b", "c"} {
		w, err := d.Watch(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ws = append(ws, w)
	}
	var listening int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&listening); err != nil {
		t.Fatal(err)
	}
	if listening != 1 {
		t.Fatalf("%d listening connections for 4 watches; want 1", listening)
	}
	if err := holder.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	for i, w := range ws[:2] {
		select {
		case _, ok := <-w.Changed():
			if !ok {
				t.Fatalf("watch %d closed", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("watch %d on the released key not woken", i)
		}
	}
	// Notifications are delivered in order: one for "b" after the release
	// of "a" arrives after it, so the watches on b and c are checked after
	// a release of b.
	hb, err := holder.TryAcquire(ctx, req("b", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx, hb); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ws[2].Changed():
	case <-time.After(10 * time.Second):
		t.Fatal("watch on b not woken by its release")
	}
	select {
	case <-ws[3].Changed():
		t.Fatal("watch on c woken by releases of a and b")
	default:
	}
}

// A listening connection that breaks closes its watches, so that the
// portable layer watches again; the next watch listens on a new one.
func TestWatchBrokenConnection(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	holder := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	w, err := d.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d.lis.mu.Lock()
	pid := d.lis.cur.conn.PgConn().PID()
	d.lis.mu.Unlock()
	var ok bool
	if err := e.admin.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate the listening backend %d: %v %v", pid, ok, err)
	}
	select {
	case _, open := <-w.Changed():
		if open {
			t.Fatal("a broken listening connection sent a change instead of closing the watch")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch not closed after its connection was terminated")
	}
	w2, err := d.Watch(ctx, "k")
	if err != nil {
		t.Fatalf("Watch after the break: %v", err)
	}
	defer w2.Close()
	h, err := holder.TryAcquire(ctx, req("k", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	select {
	case _, open := <-w2.Changed():
		if !open {
			t.Fatal("new watch closed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("new watch not woken by a release")
	}
}

// waitGoroutines waits until no more than base goroutines run: nothing a
// failed or closed Locker started may be left behind.
func waitGoroutines(t *testing.T, base int, when string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%s: %d goroutines, want at most %d:\n%s", when, runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A listening connection that stops answering (a partition: the
// connection stays open, nothing gets through) is found out by its ping
// and its watches are closed.
func TestWatchSilentConnection(t *testing.T) {
	e := newEnv(t)
	e.driver(t) // create the table directly, not through the proxy
	p := newDropProxy(t, e.serverAddr(t))
	d, err := openRaw(testenv.Context(t, 30*time.Second), e.via(t, p.addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.lis.pingInterval, d.lis.pingTimeout = 200*time.Millisecond, 200*time.Millisecond
	ctx := testenv.Context(t, time.Minute)
	w, err := d.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	time.Sleep(600 * time.Millisecond) // pings answered: the watch stays
	select {
	case _, open := <-w.Changed():
		t.Fatalf("watch on a live connection ended (open=%v)", open)
	default:
	}
	p.block()
	select {
	case _, open := <-w.Changed():
		if open {
			t.Fatal("a silent listening connection sent a change instead of closing the watch")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch not closed although its connection stopped answering pings")
	}
	p.unblock()
}
