package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dlock-go/dlock/internal/linger"

	"github.com/dlock-go/dlock/driver"
)

// statements are the SQL of one lease table. Each is a single statement
// (one implicit transaction).
type statements struct {
	acquire, remaining, release, renew string
	inspect, breakLease                string
}

// newStatements builds the SQL for n. Parameters: $1 key_hash, $2 key,
// $3 owner, $4 TTL in microseconds, $5 the holder's description (acquire);
// release takes $1 key_hash, $2 owner, $3 the channel; inspect $1
// key_hash; breakLease $1 key_hash, $2 the channel.
//
// Acquire inserts the row, or takes over an expired one, and returns its
// token; a key held by someone else returns no row from the insert and the
// holder's remaining lease, in microseconds on the server's clock, from the
// second branch. The token of a takeover is drawn by the UPDATE, after the
// row is locked, so it is greater than every token drawn before the
// previous holder's commit. The token in VALUES, drawn before any wait,
// is used only for a key with no row; release therefore never deletes rows
// (an operator who deletes one gives up only this argument for that key,
// not the sequence's order).
func newStatements(n names) statements {
	return statements{
		acquire: `WITH got AS (
    INSERT INTO ` + n.tableQ + ` AS l (key_hash, key, owner, token, metadata, expires)
    VALUES ($1, $2, $3, nextval('` + n.seqQ + `'), $5, clock_timestamp() + $4::bigint * interval '1 microsecond')
    ON CONFLICT (key_hash) DO UPDATE
        SET key = EXCLUDED.key, owner = EXCLUDED.owner, token = nextval('` + n.seqQ + `'),
            metadata = EXCLUDED.metadata, expires = clock_timestamp() + $4::bigint * interval '1 microsecond'
        WHERE l.expires <= clock_timestamp()
    RETURNING l.token
)
SELECT token, 0::bigint FROM got
UNION ALL
SELECT 0, ` + remainingExpr + `
FROM ` + n.tableQ + ` h WHERE h.key_hash = $1 AND NOT EXISTS (SELECT 1 FROM got)`,

		remaining: `SELECT ` + remainingExpr + ` FROM ` + n.tableQ + ` h WHERE h.key_hash = $1`,

		release: `WITH r AS (
    UPDATE ` + n.tableQ + ` SET expires = '-infinity'
    WHERE key_hash = $1 AND owner = $2 AND expires > clock_timestamp()
    RETURNING key_hash
)
SELECT count(*) FROM r CROSS JOIN LATERAL pg_notify($3, encode(r.key_hash, 'hex'))`,

		renew: `UPDATE ` + n.tableQ + ` SET expires = clock_timestamp() + $3::bigint * interval '1 microsecond'
WHERE key_hash = $1 AND owner = $2 AND expires > clock_timestamp()`,

		inspect: `SELECT h.token, ` + remainingExpr + `, h.metadata FROM ` + n.tableQ + ` h
WHERE h.key_hash = $1 AND h.expires > clock_timestamp()`,

		// Ends the live lease of the row, whoever holds it, keeping its
		// token (the sequence gives the next holder a higher one), and
		// notifies the waiters; returns what it ended.
		breakLease: `WITH h AS (
    SELECT token, expires, metadata FROM ` + n.tableQ + `
    WHERE key_hash = $1 AND expires > clock_timestamp() FOR UPDATE
), b AS (
    UPDATE ` + n.tableQ + ` l SET expires = '-infinity' FROM h
    WHERE l.key_hash = $1 AND l.token = h.token
    RETURNING l.token
)
SELECT h.token, ` + remainingExpr + `, h.metadata
FROM h JOIN b ON b.token = h.token CROSS JOIN LATERAL pg_notify($2, encode($1::bytea, 'hex'))`,
	}
}

// remainingExpr is the lease left on row h in microseconds, at least 1 (a
// lease that just ran out is about to be free); 0 when h has expired.
const remainingExpr = `CASE WHEN h.expires > clock_timestamp()
    THEN greatest(1, ceil(extract(epoch FROM (h.expires - clock_timestamp())) * 1000000))::bigint
    ELSE 0 END`

// keyHash is the primary key of key's row: a B-tree entry holds at most
// about 2.7 kB, and keys may be up to driver.MaxKeyLen bytes. The key itself
// is stored beside it.
func keyHash(key string) []byte {
	sum := sha256.Sum256([]byte(key))
	return sum[:]
}

// keyID is what a release notifies: the key hash in hex.
func keyID(key string) string { return hex.EncodeToString(keyHash(key)) }

// micros rounds d up to whole microseconds, the resolution of timestamptz.
func micros(d time.Duration) int64 {
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}

// state is what a Hold carries between TryAcquire, Renew and Release.
type state struct {
	hash  []byte
	owner string
	ttlUs int64
}

func (d *pgDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	turn, err := d.ops.Enter(ctx, d.closed)
	if err != nil {
		return driver.Hold{}, err
	}
	defer turn.Leave()
	st := &state{hash: keyHash(req.Key), owner: req.Owner, ttlUs: micros(req.TTL)}
	// The lease runs from now, not from the call: a turn waited for
	// behind a burst must not eat into it.
	sent := time.Now()
	token, remaining, err := d.acquire(ctx, st, req)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Held by a row committed after this statement's snapshot was
		// taken: read its lease with a fresh one.
		err = d.pool.QueryRow(ctx, d.sql.remaining, st.hash).Scan(&remaining)
		if errors.Is(err, pgx.ErrNoRows) {
			err, remaining = nil, 0
		}
		if err != nil {
			return driver.Hold{}, mapErr(ctx, err)
		}
		return driver.Hold{}, &driver.HeldError{Remaining: max(time.Duration(remaining)*time.Microsecond, time.Millisecond)}
	case err != nil:
		return driver.Hold{}, mapErr(ctx, err)
	case token == 0:
		// Held. A lease that ends in less than a millisecond is reported
		// as a millisecond, never as 0 ("unknown").
		return driver.Hold{}, &driver.HeldError{Remaining: max(time.Duration(remaining)*time.Microsecond, time.Millisecond)}
	}
	return driver.Hold{
		Token: uint64(token),
		TTL:   time.Duration(st.ttlUs) * time.Microsecond,
		Since: sent,
		State: st,
	}, nil
}

// acquire runs the acquire statement for st on a connection of the pool
// and returns its token and the holder's remaining lease (see
// newStatements).
//
// A caller that gives up while the statement is on its way still gets its
// reply, for up to acquireGrace after a cancellation (never past a
// deadline): pgx answers a cancelled statement by closing its connection,
// which leaves the statement's outcome unknown, and a grant that arrives
// as the caller gives up is better handed out than undone. When the reply
// is cut short all the same, the acquire is undone before acquire returns
// (see undo): a caller that gets an error holds nothing.
func (d *pgDriver) acquire(ctx context.Context, st *state, req driver.Request) (token, remaining int64, err error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err // nothing was sent
	}
	pid := conn.Conn().PgConn().PID()
	qctx, stop := lingering(ctx, acquireGrace)
	err = conn.QueryRow(qctx, d.sql.acquire, st.hash, []byte(req.Key), st.owner, st.ttlUs, req.Meta).Scan(&token, &remaining)
	stop()
	conn.Release()
	if err != nil && !errors.Is(err, pgx.ErrNoRows) && !answered(err) {
		// The statement may have run, or may still run, and the reply
		// been lost.
		d.undo(ctx, st, pid)
	}
	return token, remaining, err
}

// acquireGrace is how long an acquire statement whose caller gave up may
// still wait for its reply.
const acquireGrace = time.Second

// undo ends st's lease, for an acquire whose reply was cut short, before
// the acquire returns: a Lock that returns an error must hold nothing
// when it returns (etcd issue 10111 is a Lock that did). The statement
// may still be on its way or running on the server session pid, whose
// connection pgx has closed: a release sent before the statement runs
// would find nothing, and the statement would then take the lease. So
// undo first waits for that session to end (pgx cancels its statement
// and ends it), after which the statement has either committed or never
// will, and then releases, owner-checked: it never ends someone else's
// lease. Both are bounded by undoTimeout on a context of their own; when
// they do not finish in time (a server that does not answer), the
// release goes on in the background (cleanup).
func (d *pgDriver) undo(ctx context.Context, st *state, pid uint32) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if !d.sessionEnded(uctx, pid) {
		d.cleanup(st)
		return
	}
	if err := d.release(uctx, st); err != nil && !errors.Is(err, driver.ErrNotHeld) {
		d.cleanup(st)
	}
}

// undoTimeout bounds undo: the wait for the session of a cut-short
// acquire to end and the release after it. On a loaded machine a second
// did not always cover the wait and a new connection for the release, and
// the release went on in the background, after acquire had returned.
const undoTimeout = 2 * time.Second

// sessionEnded waits until the server session pid has ended, and reports
// whether it saw it end before ctx did. Behind a connection pooler the
// pid names no server session, and the wait ends at once.
func (d *pgDriver) sessionEnded(ctx context.Context, pid uint32) bool {
	for pause := 500 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		var n int64
		err := d.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, int64(pid)).Scan(&n)
		if err != nil {
			return false
		}
		if n == 0 {
			return true
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return false
		}
	}
}

func stateOf(h driver.Hold) (*state, error) {
	st, ok := h.State.(*state)
	if !ok || st == nil {
		return nil, fmt.Errorf("postgres: hold not made by this backend: %w", driver.ErrNotHeld)
	}
	return st, nil
}

func (d *pgDriver) Release(ctx context.Context, h driver.Hold) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	st, err := stateOf(h)
	if err != nil {
		return err
	}
	return d.release(ctx, st)
}

// release ends st's lease if it is still current, and notifies the
// waiters of every Locker on the table.
func (d *pgDriver) release(ctx context.Context, st *state) error {
	var n int64
	if err := d.pool.QueryRow(ctx, d.sql.release, st.hash, st.owner, d.n.channel).Scan(&n); err != nil {
		return mapErr(ctx, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: lease expired or taken over: %w", driver.ErrNotHeld)
	}
	return nil
}

func (d *pgDriver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	st, err := stateOf(h)
	if err != nil {
		return 0, err
	}
	rctx, stop := lingering(ctx, renewGrace)
	defer stop()
	tag, err := d.pool.Exec(rctx, d.sql.renew, st.hash, st.owner, st.ttlUs)
	if err != nil {
		return 0, mapErr(ctx, err)
	}
	if tag.RowsAffected() != 1 {
		return 0, fmt.Errorf("postgres: lease expired, taken over or removed: %w", driver.ErrNotHeld)
	}
	return time.Duration(st.ttlUs) * time.Microsecond, nil
}

// renewGrace is how long a renewal whose context was cancelled may still
// wait for its reply. Unlock cancels the watchdog's renewal in flight and
// waits for it; pgx answers a cancelled statement by breaking its
// connection, and on a slow link the release that follows then waited for
// a new one (several round trips) and could arrive after the lease it was
// ending had run out: an Unlock well inside its window reported the hold
// lost. Letting the renewal's reply come keeps the connection for the
// release; a server that does not answer within the grace still has its
// connection broken.
const renewGrace = time.Second

// lingering returns a context that ends at ctx's deadline, or grace after
// ctx is cancelled, whichever comes first; stop releases it.
func lingering(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	l, stop := linger.After(ctx, grace)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		l, cancel = context.WithDeadline(l, dl)
		return l, func() { cancel(); stop() }
	}
	return l, stop
}

// cleanup releases st in the background, for an acquire whose outcome is
// unknown and which undo could not settle in time. The release is
// owner-checked: it never ends someone else's lease.
func (d *pgDriver) cleanup(st *state) {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	if d.bgDone {
		return // closing: the lease, if any, runs out by itself
	}
	d.bgWG.Add(1)
	go func() {
		defer d.bgWG.Done()
		ctx, cancel := context.WithTimeout(d.bg, cleanupTimeout)
		defer cancel()
		closed := d.closed
		for _, wait := range cleanupRetries {
			if closed == nil {
				// Closing: Close waits for these last attempts, so they
				// come sooner (the acquire may still commit after the
				// first one, as below).
				wait = min(wait, closingRetry)
			}
			select {
			case <-time.After(wait):
			case <-closed:
				closed = nil // attempt now, and the rest sooner
			case <-ctx.Done():
				return
			}
			// A stalled server may run the lost statement after this
			// release: look again a little later, until something was
			// released or time is up.
			if d.release(ctx, st) == nil {
				return
			}
		}
	}()
}

// cleanupRetries are the pauses before each release attempt of a cleanup;
// closingRetry bounds them once the driver is closing.
var cleanupRetries = []time.Duration{0, 100 * time.Millisecond, time.Second}

const closingRetry = 200 * time.Millisecond

var _ driver.Inspector = (*pgDriver)(nil)

// Inspect reads key's row: held while its lease runs on the server's
// clock, with its token, the lease left and the holder's description
// (the metadata column). Waiters is -1: the table keeps no queue.
func (d *pgDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return d.inspect(ctx, d.sql.inspect, keyHash(key))
}

// Break ends key's live lease, whoever holds it (expires = -infinity, the
// token kept), and notifies the waiters, in one statement. The holder's
// next renewal finds the lease ended and reports the loss; the next
// holder's token comes from the sequence, so it is higher.
func (d *pgDriver) Break(ctx context.Context, key string) (driver.Info, error) {
	return d.inspect(ctx, d.sql.breakLease, keyHash(key), d.n.channel)
}

func (d *pgDriver) inspect(ctx context.Context, sql string, args ...any) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	var (
		token, remaining int64
		meta             string
	)
	err := d.pool.QueryRow(ctx, sql, args...).Scan(&token, &remaining, &meta)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Info{Waiters: -1}, nil
	}
	if err != nil {
		return driver.Info{}, mapErr(ctx, err)
	}
	return driver.Info{
		Held:      true,
		Token:     uint64(token),
		Remaining: max(time.Duration(remaining)*time.Microsecond, time.Microsecond),
		Meta:      meta,
		Waiters:   -1,
	}, nil
}
