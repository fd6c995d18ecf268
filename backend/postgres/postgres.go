package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// The URL schemes this package registers.
const (
	Scheme      = "postgres"   // postgres://user:password@host:5432/db?params
	SchemeLong  = "postgresql" // the same, as libpq also spells it
	defaultPort = "5432"
)

// DefaultTable is the lease table's name when Config.Table is empty.
const DefaultTable = "dlock_locks"

// MaxTableLen is the longest table name accepted: PostgreSQL truncates
// identifiers at 63 bytes, and the token sequence's name is the table's
// with "_token_seq" appended.
const MaxTableLen = 63 - len(seqSuffix)

const seqSuffix = "_token_seq"

// DefaultConnectTimeout bounds each connection attempt of a pool made from
// a URL without connect_timeout, so that a server that accepts connections
// and never answers is reported as unavailable rather than waited for.
const DefaultConnectTimeout = 5 * time.Second

// DefaultMinConns is the number of connections a pool made from a URL
// without pool_min_conns keeps open.
const DefaultMinConns = 2

// cleanupTimeout bounds the background release that undoes an acquire
// whose outcome is unknown.
const cleanupTimeout = 5 * time.Second

func init() {
	dlock.Register(Scheme, open)
	dlock.Register(SchemeLong, open)
}

// Config configures the backend. The zero value is usable: the
// table DefaultTable in the connection's current schema.
type Config struct {
	// Schema holds the lease table and its sequence. Empty means the
	// schema the connection resolves unqualified names to
	// (current_schema(), the first existing schema of search_path), read
	// once when the Locker is made. URL parameter: schema.
	Schema string

	// Table is the lease table. Default DefaultTable; at most MaxTableLen
	// bytes. Lockers on different tables never see each other's locks.
	// URL parameter: table.
	Table string
}

func (c Config) normalize() (Config, error) {
	out := c
	if out.Table == "" {
		out.Table = DefaultTable
	}
	if err := checkIdent("table", out.Table, MaxTableLen); err != nil {
		return out, err
	}
	if out.Schema != "" {
		if err := checkIdent("schema", out.Schema, 63); err != nil {
			return out, err
		}
	}
	return out, nil
}

func checkIdent(what, name string, maxLen int) error {
	if name == "" {
		return fmt.Errorf("%s name is empty", what)
	}
	if len(name) > maxLen {
		return fmt.Errorf("%s name %q is %d bytes; at most %d", what, name, len(name), maxLen)
	}
	if strings.ContainsRune(name, 0) {
		return fmt.Errorf("%s name %q contains a NUL byte", what, name)
	}
	return nil
}

// names are the quoted SQL names of one lease table.
type names struct {
	schema, table string // unquoted
	tableQ, seqQ  string // quoted, schema-qualified
	recordsQ      string // the record table (driver.Recorder), quoted
	channel       string // NOTIFY channel (unquoted)
}

func newNames(schema, table string) names {
	n := names{
		schema: schema,
		table:  table,
		tableQ: pgx.Identifier{schema, table}.Sanitize(),
		seqQ:   pgx.Identifier{schema, table + seqSuffix}.Sanitize(),
		// recordsQ: the record table, created by the first Record.
		recordsQ: pgx.Identifier{schema, table + recordSuffix}.Sanitize(),
	}
	// One channel per table; a channel name is an identifier (63 bytes).
	ch := "dlock:" + schema + "." + table
	if len(ch) > 63 {
		sum := sha256.Sum256([]byte(schema + "." + table))
		ch = "dlock:" + hex.EncodeToString(sum[:16])
	}
	n.channel = ch
	return n
}

// New returns a Locker that keeps its leases in a table of the database
// pool connects to. The pool stays the caller's: closing the Locker does
// not close it. Waiters listen on one connection of the Locker's own, made
// with the pool's connection settings (pool.Config().ConnConfig; the
// pool's BeforeConnect and AfterConnect hooks do not run for it), which
// the Locker closes.
//
// New talks to the server: it resolves the schema, creates the table and
// its token sequence if they do not exist (see the package documentation),
// and checks that an existing table has the expected columns. A server that
// does not answer is an error matching dlock.ErrUnavailable; a table of
// another shape, ErrNotALockTable. The dlock options set the Locker's
// defaults.
func New(ctx context.Context, pool *pgxpool.Pool, c Config, opts ...dlock.Option) (*dlock.Locker, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: postgres: nil pool", dlock.ErrInvalidOption)
	}
	cfg, err := c.normalize()
	if err != nil {
		return nil, fmt.Errorf("%w: postgres: %v", dlock.ErrInvalidOption, err)
	}
	d, err := newDriver(ctx, pool, cfg, false)
	if err != nil {
		return nil, err
	}
	return lockerOver(d, opts)
}

// lockerOver wraps d in the portable Locker, closing d if that fails.
func lockerOver(d *pgDriver, opts []dlock.Option) (*dlock.Locker, error) {
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// open is the OpenFunc for postgres:// and postgresql:// URLs.
func open(ctx context.Context, u *url.URL) (driver.Locker, error) {
	d, err := openDriver(ctx, u)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// openDriver makes a pool of its own from u and the driver over it.
func openDriver(ctx context.Context, u *url.URL) (*pgDriver, error) {
	cfg, pcfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
	}
	d, err := newDriver(ctx, pool, cfg, true)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// The backend's own URL parameters.
var ownParams = []string{"table", "schema"}

// dsnParams are the connection parameters passed on to pgx: libpq's
// connection keywords that pgx understands, pgx's own, pgxpool's, and the
// server settings a URL commonly sets. Any other parameter is an error
// (pgx would send it to the server as a setting, where a typo fails only at
// connect time, or not at all); other server settings go in options=-c
// name=value, as with libpq.
var dsnParams = []string{
	// libpq keywords
	"host", "port", "dbname", "user", "password", "passfile", "connect_timeout",
	"sslmode", "sslkey", "sslcert", "sslrootcert", "sslpassword", "sslsni", "sslnegotiation",
	"krbsrvname", "krbspn", "target_session_attrs", "service", "servicefile",
	"application_name", "fallback_application_name", "client_encoding", "options",
	// server settings
	"search_path", "statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "timezone",
	// pgx
	"statement_cache_capacity", "description_cache_capacity", "default_query_exec_mode",
	// pgxpool
	"pool_max_conns", "pool_min_conns", "pool_min_idle_conns", "pool_max_conn_lifetime",
	"pool_max_conn_idle_time", "pool_health_check_period", "pool_max_conn_lifetime_jitter",
}

// parseURL reads postgres://[user[:password]@]host[:port][,host[:port]...][/db][?params].
func parseURL(u *url.URL) (Config, *pgxpool.Config, error) {
	var o Config
	if u.Opaque != "" || u.Fragment != "" {
		return o, nil, fmt.Errorf("%w: %s: want %s://[user:password@]host[:port][/database][?params]",
			driver.ErrInvalidURL, u.Redacted(), strings.ToLower(u.Scheme))
	}
	// A host in the URL, or host= (a Unix socket directory, as libpq takes).
	if u.Host != "" || !u.Query().Has("host") {
		if _, err := driver.Hosts(u, defaultPort); err != nil {
			return o, nil, err
		}
	}
	p := driver.NewParams(u)
	o.Table = p.String("table", "")
	o.Schema = p.String("schema", "")
	q := u.Query()
	if _, ok := q["table"]; ok && o.Table == "" {
		return o, nil, fmt.Errorf("%w: table is empty", driver.ErrInvalidURL)
	}
	if _, ok := q["schema"]; ok && o.Schema == "" {
		return o, nil, fmt.Errorf("%w: schema is empty", driver.ErrInvalidURL)
	}
	for _, name := range dsnParams {
		p.String(name, "")
	}
	if err := p.Done(); err != nil {
		return o, nil, fmt.Errorf("%w (this backend's own parameters: %s; other server settings go in options=-c name=value)",
			err, strings.Join(ownParams, ", "))
	}
	o, err := o.normalize()
	if err != nil {
		return o, nil, fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
	}
	for _, name := range ownParams {
		q.Del(name)
	}
	rest := *u
	rest.Scheme = "postgres"
	rest.RawQuery = q.Encode()
	pcfg, err := pgxpool.ParseConfig(rest.String())
	if err != nil {
		return o, nil, fmt.Errorf("%w: %s: %v", driver.ErrInvalidURL, u.Redacted(), redactErr(err, u))
	}
	if _, ok := q["connect_timeout"]; !ok {
		pcfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	if _, ok := q["pool_min_conns"]; !ok {
		// A renewal that overlaps another call (an Unlock, a TryAcquire
		// of another key) should not wait for a new connection: opening
		// one costs several round trips.
		pcfg.MinConns = DefaultMinConns
	}
	return o, pcfg, nil
}

// redactErr keeps a password out of a pgx parse error, which quotes the
// connection string.
func redactErr(err error, u *url.URL) string {
	msg := err.Error()
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// pgDriver is the driver.Locker over one pgx pool.
type pgDriver struct {
	pool    *pgxpool.Pool
	ownPool bool // opened from a URL: Close closes it
	n       names
	sql     statements
	lis     *listener

	bg       context.Context // background cleanups; cancelled by Close
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgDone and bgWG.Add against Close
	bgDone   bool
	bgWG     sync.WaitGroup

	closeOnce sync.Once
	closed    chan struct{}
	ops       gate.Gate // acquire attempts in flight
}

var (
	_ driver.Locker  = (*pgDriver)(nil)
	_ driver.Limiter = (*pgDriver)(nil)
)

// MaxTTL is the longest lease this backend grants: dlock.MaxTTL, 10
// years. The lease's end is clock_timestamp() + TTL * interval '1
// microsecond', a product PostgreSQL takes through float8, exact below
// 2^53 microseconds (about 285 years), on a timestamptz good until the
// year 294276. The TTL in microseconds is computed in Go first, from a
// time.Duration, which overflowed to a negative lease (a row that was
// free at once) near 292 years; dlock.MaxTTL keeps far from both.
const MaxTTL = dlock.MaxTTL

// Limits reports the longest lease, MaxTTL.
func (d *pgDriver) Limits() driver.Limits { return driver.Limits{MaxTTL: MaxTTL} }

func newDriver(ctx context.Context, pool *pgxpool.Pool, cfg Config, own bool) (*pgDriver, error) {
	n, err := prepareTable(ctx, pool, cfg)
	if err != nil {
		return nil, err
	}
	d := &pgDriver{
		pool:    pool,
		ownPool: own,
		n:       n,
		sql:     newStatements(n),
		closed:  make(chan struct{}),
		// A Locker admits as many acquire attempts at a time as its pool has
		// connections (see package gate): renewals share the pool with them. A
		// burst of 5,000 Locks on one Locker made a 3s hold's renewal wait for a
		// connection until its window had run out, and the hold was given up
		// (TestBurstKeepsHolds); with 64 attempts admitted, it still was on a
		// loaded machine. Releases are not held back: the portable layer stops
		// renewing a hold before it releases it, so a release that waited for a
		// turn behind a burst could find its hold run out.
		ops: gate.New(int(max(pool.Config().MaxConns, 1))),
	}
	d.lis = newListener(pool, n.channel)
	d.bg, d.bgCancel = context.WithCancel(context.Background())
	return d, nil
}

// prepareTable resolves the schema and makes sure the table and its
// sequence exist with the expected shape.
func prepareTable(ctx context.Context, pool *pgxpool.Pool, cfg Config) (names, error) {
	schema := cfg.Schema
	if schema == "" {
		var cur *string
		if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&cur); err != nil {
			return names{}, openErr(ctx, pool, err)
		}
		if cur == nil {
			return names{}, fmt.Errorf("postgres: no schema given and the connection's search_path names no existing schema")
		}
		schema = *cur
	}
	n := newNames(schema, cfg.Table)
	var table, seq *string
	err := pool.QueryRow(ctx, `SELECT to_regclass($1)::text, to_regclass($2)::text`, n.tableQ, n.seqQ).Scan(&table, &seq)
	if err != nil {
		return n, openErr(ctx, pool, err)
	}
	if table == nil || seq == nil {
		if err := createTable(ctx, pool, n); err != nil {
			return n, err
		}
	}
	// An existing table must be ours: every column this backend uses.
	if _, err := pool.Exec(ctx, `SELECT key_hash, key, owner, token, metadata, expires FROM `+n.tableQ+` LIMIT 0`); err != nil {
		if e := mapErr(ctx, err); errors.Is(e, driver.ErrUnavailable) || ctx.Err() != nil {
			return n, openErr(ctx, pool, err)
		}
		return n, fmt.Errorf("%w: %s: %v", ErrNotALockTable, n.tableQ, err)
	}
	return n, nil
}

// createTable creates the sequence and the table, serialised with other
// Lockers doing the same by a transaction-scoped advisory lock (two
// concurrent CREATE ... IF NOT EXISTS can otherwise fail on the catalog's
// unique index).
func createTable(ctx context.Context, pool *pgxpool.Pool, n names) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "dlock create "+n.tableQ); err != nil {
			return err
		}
		// The first token is the server's clock in microseconds, so that a
		// table dropped and created again still issues greater tokens
		// than before (as long as the clock has not gone back).
		var start int64
		if err := tx.QueryRow(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&start); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %s AS bigint MINVALUE 1 START WITH %d NO CYCLE`, n.seqQ, start)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, createTableSQL(n))
		return err
	})
	if err != nil {
		if e := mapErr(ctx, err); errors.Is(e, driver.ErrUnavailable) || ctx.Err() != nil {
			return openErr(ctx, pool, err)
		}
		return fmt.Errorf("postgres: creating lease table %s: %w", n.tableQ, err)
	}
	return nil
}

func createTableSQL(n names) string {
	return `CREATE TABLE IF NOT EXISTS ` + n.tableQ + ` (
    key_hash bytea       PRIMARY KEY,
    key      bytea       NOT NULL,
    owner    text        NOT NULL,
    token    bigint      NOT NULL CHECK (token > 0),
    metadata text        NOT NULL DEFAULT '',
    expires  timestamptz NOT NULL
)`
}

// openErr reports a failure to reach the server at open: unavailable,
// keeping the context's error in the chain, unless the server answered
// with a refusal (bad password, no such database), which is not transient.
func openErr(ctx context.Context, pool *pgxpool.Pool, err error) error {
	e := mapErr(ctx, err)
	if !errors.Is(e, driver.ErrUnavailable) && ctx.Err() == nil {
		return fmt.Errorf("postgres: %w", err)
	}
	cfg := pool.Config().ConnConfig
	hosts := []string{fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fmt.Sprintf("%s:%d", fb.Host, fb.Port))
	}
	sort.Strings(hosts)
	if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%w: postgres %s: no answer before the context ended: %w (%v)", driver.ErrUnavailable, strings.Join(hosts, ","), ctx.Err(), err)
	}
	return fmt.Errorf("%w: postgres %s: %w", driver.ErrUnavailable, strings.Join(hosts, ","), err)
}

func (d *pgDriver) check(ctx context.Context) error {
	select {
	case <-d.closed:
		return driver.ErrClosed
	default:
	}
	return ctx.Err()
}

// Watch returns a watch on key's releases, over the Locker's one listening
// connection.
func (d *pgDriver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	w, err := d.lis.watch(ctx, keyID(key))
	if err != nil {
		if errors.Is(err, driver.ErrClosed) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
			return nil, err
		}
		return nil, mapErr(ctx, err)
	}
	return w, nil
}

// Close stops the listener, lets each background cleanup make one last
// release attempt (an acquire cut short by Close, whose statement may have
// run, must not leave its lease behind), and, when the pool was made from
// a URL, closes it.
func (d *pgDriver) Close() error {
	d.closeOnce.Do(func() {
		close(d.closed)
		d.lis.close()
		d.bgMu.Lock()
		d.bgDone = true
		d.bgMu.Unlock()
		d.bgWG.Wait() // each bounded by cleanupTimeout
		d.bgCancel()
		if d.ownPool {
			d.pool.Close()
		}
	})
	return nil
}
