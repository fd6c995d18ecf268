// Package postgres is dlock's backend for PostgreSQL: leases kept as rows
// of a table, fencing tokens from a sequence, and waiting on LISTEN/NOTIFY.
// It registers the URL schemes postgres and postgresql with dlock.Open, and
// New takes a *pgxpool.Pool (pgx v5) the program already has.
//
// With the lock and the data in one database, the lock check and a fenced
// write can be one transaction (see Fence): a holder paused past its lease
// cannot commit once another holder has the key.
//
// # The lease table
//
// Open and New create the table and its sequence if they do not exist (in
// one transaction, serialised by an advisory lock, so Lockers starting
// together do not collide), which needs the CREATE privilege on the schema
// the first time only; afterwards SELECT, INSERT and UPDATE on the table
// and USAGE on the sequence are enough. To create them in a migration
// instead, run the same statements ahead of time:
//
//	CREATE SEQUENCE dlock_locks_token_seq AS bigint MINVALUE 1 START WITH <now in µs since 1970> NO CYCLE;
//	CREATE TABLE dlock_locks (
//	    key_hash bytea       PRIMARY KEY,            -- SHA-256 of the key
//	    key      bytea       NOT NULL,               -- the key itself
//	    owner    text        NOT NULL,               -- random, one per hold
//	    token    bigint      NOT NULL CHECK (token > 0),
//	    metadata text        NOT NULL DEFAULT '',    -- the holder's description
//	    expires  timestamptz NOT NULL                -- end of the lease, server clock
//	);
//
// The table is named by Config.Table (URL parameter table, default
// dlock_locks), in Config.Schema (URL parameter schema, default the
// connection's current_schema()); the sequence is the table's name with
// _token_seq appended. An existing table without these columns is refused
// with ErrNotALockTable. Keys are any bytes up to dlock's limit; the
// primary key is their SHA-256, since a B-tree entry holds at most about
// 2.7 kB.
//
// # Records
//
// A key's record (driver.Recorder, which dlock.Semaphore uses for its
// number of permits) is a row of a table of its own, named after the lease
// table with _records appended (dlock_locks_records for
// dlock_locks), in the same schema. The first Record creates it as
// the lease table is created; to create it ahead of time:
//
//	CREATE TABLE dlock_locks_records (
//	    key_hash bytea PRIMARY KEY,   -- SHA-256 of the key
//	    key      bytea NOT NULL,
//	    value    bytea NOT NULL
//	);
//
// Record is one statement, an INSERT ... ON CONFLICT DO NOTHING that
// returns the row it made or the row it found (a second SELECT when the
// conflicting row was committed after the statement began); ClearRecord is
// one DELETE of the row with the given value. No lock statement touches
// this table. A record is as durable as any committed row: it is lost only
// with the database (or a failover to a standby that had not received the
// commit, under asynchronous replication).
//
// # How a lock works
//
// Every statement is a single statement in its own transaction, and every
// time is the server's clock (clock_timestamp()), never the client's:
//
//   - Acquire: one INSERT ... ON CONFLICT (key_hash) DO UPDATE ... WHERE
//     the row's lease has expired, RETURNING the token. A key that is held
//     returns, from the same statement, the holder's remaining lease on the
//     server's clock, reported as a *driver.HeldError so that waiters wake
//     when it runs out.
//   - Release: an UPDATE that ends the lease (expires = -infinity) only if
//     the row still has this hold's owner and has not expired, and calls
//     pg_notify in the same statement. A holder whose lease expired and was
//     taken over can never end its successor's lease. Rows are never
//     deleted: one small row stays per key ever locked.
//   - Renew: an UPDATE of expires, checked the same way; a row taken over,
//     expired or removed makes it fail with dlock.ErrNotHeld, and dlock's
//     watchdog then reports the loss (Done closes) before the lease can
//     expire on the server. A lost connection, a server restarting or
//     refusing connections is dlock.ErrUnavailable: transient, retried by
//     the watchdog until the validity window would close.
//   - Waiting: the waiters of a Locker share one connection that LISTENs
//     on the table's channel (its own, outside the pool); a release notifies
//     the hex SHA-256 of its key, and the Locker wakes the waiters of that
//     key. A waiter is also woken by its timer at the holder's remaining
//     lease, since expiry notifies nothing. There is no polling at a fixed
//     interval. A listening connection that breaks (or does not answer a
//     ping after 15 s of silence) closes its watches; dlock then watches
//     again on a new one.
//   - Inspect: a SELECT of the key's row whose lease runs on the server's
//     clock: token, lease left, and the metadata column, where acquire
//     stores the holder's description (dlock.WithOwner). Waiters is -1.
//   - Break: one statement that ends the row's live lease (expires =
//     -infinity), whoever holds it, keeps its token and notifies the
//     waiters; the broken holder's next renewal (every TTL/3) matches no
//     row and reports ErrLockLost, and the next holder's token, drawn from
//     the sequence, is higher.
//
// Statements run in the pool's query execution mode (pgx's default
// prepares each statement once per connection and caches it; URL parameter
// default_query_exec_mode). The listening connection needs a session of
// its own: LISTEN does not work through a pooler in transaction mode.
//
// An acquire whose caller gives up while the statement is on its way
// still waits up to a second for the reply (never past the caller's
// deadline): a grant that arrives then is handed out. An acquire whose
// reply is lost all the same (a deadline, a broken connection) is undone
// before TryAcquire or Lock returns: it waits for the statement's server
// session to end (pg_stat_activity), after which the statement has run or
// never will, then releases, owner-checked; a Lock that returns an error
// holds nothing (the conformance case CancelAtGrant, after etcd issue
// 10111). When the server does not answer that within two seconds, the
// release goes on in the background, tried again after 100 ms and 1 s.
//
// # Fencing tokens
//
// Tokens come from the table's bigint sequence, which never hands out a
// value twice. A takeover draws its token in the UPDATE, after the row is
// locked, so every holder's token is greater than its predecessor's. The
// sequence starts at the server's clock in microseconds when it is
// created, so tokens keep increasing even if the table and sequence are
// dropped and created again, as long as the server's clock has not gone
// back and fewer than a million tokens a second were drawn on average.
// Failed attempts also draw (and discard) a value.
//
// # Why not advisory locks
//
// pg_try_advisory_lock is not offered as a mode. A session advisory lock
// belongs to one connection, not to a lease: it has no expiry (a holder
// that hangs with its connection open holds it forever), it is lost
// silently when the connection drops (a pool reconnecting underneath does
// not tell anybody, and the next statement on a new connection runs
// unlocked), it cannot be renewed, checked or released from another
// connection of a pool, and it carries no fencing token. A lease row has
// an expiry on the server's clock, an owner that release and renew check,
// a token from a sequence, and a state that any connection, and any
// transaction of the application (Fence), can read.
//
// # URL
//
//	postgres://[user[:password]@]host[:5432][,host2[:port]...][/database][?params]
//	postgresql://...
//
// Parameters of this backend:
//
//	table=dlock_locks   the lease table (at most 53 bytes)
//	schema=             its schema (default: current_schema())
//
// plus dlock's ttl (at most MaxTTL, 10 years; a longer TTL is refused with
// dlock.ErrInvalidOption when the Locker or Mutex is made) and autorenew,
// and the usual connection parameters,
// which go to pgx: sslmode, sslrootcert, sslcert, sslkey, sslpassword,
// connect_timeout (default here 5s, so that a server that never answers is
// reported as unavailable), application_name, target_session_attrs,
// options, search_path, statement_timeout, lock_timeout, pool_max_conns,
// pool_min_conns (default here 2, so that a renewal overlapping another
// call does not wait for a new connection), pool_max_conn_lifetime, pool_max_conn_idle_time,
// pool_health_check_period, default_query_exec_mode, ... (the list is
// dsnParams in the source). Any other parameter is an error matching
// dlock.ErrInvalidURL; other server settings go in options=-c name=value.
//
// # What it promises
//
// Within one PostgreSQL server the dlock promises hold: exclusion within
// the validity window, tokens that increase, and a loss signal when
// renewal fails. A committed lease survives a server restart (crash
// recovery replays it), and it runs on the server's clock meanwhile. What
// it does not cover:
//
//   - Asynchronous replication: a standby promoted after a failover may
//     lack the latest leases and sequence values, so a lock could be
//     granted twice and tokens could repeat. Use synchronous replication
//     (a synchronous standby with synchronous_commit = on or remote_apply)
//     if a failover must not lose what was granted. Failover is not tested
//     here; the tests run one server.
//   - A step of the server's clock forward shortens every lease; a step
//     back lengthens them.
//   - A lease row changed from outside (DELETE, UPDATE) is noticed at the
//     holder's next renewal, within TTL/3. To break a lock by hand, set the
//     row's expires to '-infinity'.
//   - Across Lockers (processes) waiters are not queued: a release wakes
//     one waiter per Locker and the first to ask wins. Within a Locker,
//     waiters for one key are served one at a time by dlock.
//
// # Benchmarks
//
// Measured with PostgreSQL 15 (the launcher's defaults: fsync and
// synchronous_commit on) on loopback, on a 2-core machine shared with
// other builds (load average 4-6 during the run, so absolute times are
// inflated and noisy; an earlier run of nearly the same code at a similar
// load gave uncontended Lock+Unlock 0.87-1.09 ms), three runs each:
//
//	make up TOPOLOGIES=postgres; set -a; . .dlock/endpoints.env; set +a
//	go test -run '^$' -bench . -benchmem -count 3 -benchtime 2s ./backend/postgres/
//
// BenchmarkConformance (the suite's, as every backend runs it):
//
//	Uncontended Lock+Unlock     1.32-1.80 ms   37 allocs
//	ParallelKeys                0.80-2.02 ms   37 allocs
//	Contended (8 over 2)        171-184 acquisitions/s, handoff p50 1.9-2.9 ms, p99 15.6-21.3 ms
//
// BenchmarkLockUnlock, rotated in one loop: dlock 3.6-4.4 ms, this driver
// alone (TryAcquire+Release) 3.7-4.4 ms, and the bare session advisory
// lock (pg_advisory_lock + pg_advisory_unlock on one pooled connection)
// 0.89-1.85 ms, i.e. 0.24-0.42 of dlock's throughput. The difference is the
// commit: an acquire and a release each write a row and wait for the WAL
// to reach disk, where an advisory lock writes nothing (and promises
// nothing past its connection; see above). The portable layer costs
// nothing measurable beside it (dlock against the driver alone). Two runs
// each, back to back (load average 7-9), with synchronous_commit on and
// then off (options=-c%20synchronous_commit%3Doff in the URL: no wait for
// the WAL flush):
//
//	                      on              off
//	Uncontended           1.12-1.50 ms    0.52-0.69 ms
//	LockUnlock dlock      0.95-1.28 ms    0.36-0.37 ms
//	LockUnlock bare       0.35-0.57 ms    0.21-0.30 ms
//	bare/dlock            0.37-0.44       0.56-0.83
//
// Off costs the promises above: a server crash could forget the last
// leases and sequence values, so a lock could be granted twice and tokens
// repeat. Everything else here keeps it on.
//
// lockctl bench --backend postgres://... measures the same from the
// command line, beside the other backends.
//
// # Minimum hold
//
// A minimum hold (dlock.WithMinHold, driver.Lapser) released early sets
// the row's expires, owner-checked as a renewal is, to what remains of it
// on the server's clock, rounded up to the microsecond. An expiry notifies
// nobody: a waiter tries again at the remaining lease its refused attempt
// read.
package postgres
