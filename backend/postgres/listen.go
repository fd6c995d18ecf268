package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/dlock-go/dlock/driver"
)

// pingInterval is how long the listening connection may stay silent before
// it is pinged; a ping that gets no answer within pingTimeout counts as a
// broken connection.
const (
	pingInterval = 15 * time.Second
	pingTimeout  = 5 * time.Second
)

// listener is a Locker's LISTEN connection, shared by every waiter: one
// connection, listening on the table's channel, and an in-process fan-out
// from the notified key to the watches on it. A release notifies the hex
// SHA-256 of its key (a key itself may be too long for a payload).
//
// The connection is made by the first watch, with the pool's connection
// settings but outside the pool, and LISTENs before that watch is returned, so that no release committed
// after Watch returns is missed. When it breaks, every watch on it is
// closed (the portable layer then re-watches, and its lease timer covers
// the gap), and the next watch makes a new one.
type listener struct {
	pool    *pgxpool.Pool
	channel string
	dial    chan struct{} // a one-slot semaphore: one dial at a time

	pingInterval, pingTimeout time.Duration

	mu     sync.Mutex
	cur    *listenConn
	closed bool
	wg     sync.WaitGroup // receive loops
}

func newListener(pool *pgxpool.Pool, channel string) *listener {
	return &listener{pool: pool, channel: channel, dial: make(chan struct{}, 1),
		pingInterval: pingInterval, pingTimeout: pingTimeout}
}

// listenConn is one listening connection and the watches on it.
type listenConn struct {
	l      *listener
	conn   *pgx.Conn // used only by the receive loop once it runs
	cancel context.CancelFunc
	ctx    context.Context
	dead   chan struct{}                  // closed when broken or closed
	keys   map[string]map[*watch]struct{} // by key ID; guarded by l.mu
}

// watch is one waiter's view of the releases of one key.
type watch struct {
	lc      *listenConn
	id      string
	changed chan struct{}
	removed bool // guarded by lc.l.mu
}

var _ driver.Watch = (*watch)(nil)

func (w *watch) Changed() <-chan struct{} { return w.changed }

func (w *watch) Close() error {
	l := w.lc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.removed {
		return nil
	}
	w.removed = true
	ws := w.lc.keys[w.id]
	delete(ws, w)
	if len(ws) == 0 {
		delete(w.lc.keys, w.id)
	}
	return nil
}

// watch returns a watch on the key with ID id, once the connection
// listens.
func (l *listener) watch(ctx context.Context, id string) (*watch, error) {
	for attempt := 0; ; attempt++ {
		lc, err := l.conn(ctx)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return nil, driver.ErrClosed
		}
		select {
		case <-lc.dead:
			l.mu.Unlock()
			if attempt < 2 {
				continue // broke just now: make a new one
			}
			return nil, driver.Unavailable(errors.New("postgres: listening connection keeps breaking"))
		default:
		}
		w := &watch{lc: lc, id: id, changed: make(chan struct{}, 1)}
		ws := lc.keys[id]
		if ws == nil {
			ws = map[*watch]struct{}{}
			lc.keys[id] = ws
		}
		ws[w] = struct{}{}
		l.mu.Unlock()
		return w, nil
	}
}

// conn returns the live listening connection, making one if needed.
func (l *listener) conn(ctx context.Context) (*listenConn, error) {
	l.mu.Lock()
	lc := l.cur
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return nil, driver.ErrClosed
	}
	if lc != nil && !lc.isDead() {
		return lc, nil
	}
	select {
	case l.dial <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-l.dial }()
	l.mu.Lock()
	lc = l.cur
	l.mu.Unlock()
	if lc != nil && !lc.isDead() {
		return lc, nil // another watch made it meanwhile
	}
	// A connection of its own, made with the pool's connection settings,
	// so that the pool keeps every connection it has: taking one out would
	// make the pool open another on the path of the next acquire.
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("postgres: LISTEN: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	lc = &listenConn{l: l, conn: conn, ctx: lctx, cancel: cancel, dead: make(chan struct{}), keys: map[string]map[*watch]struct{}{}}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		cancel()
		closeConn(conn)
		return nil, driver.ErrClosed
	}
	l.cur = lc
	l.wg.Add(1)
	l.mu.Unlock()
	go lc.receive()
	return lc, nil
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

func (lc *listenConn) isDead() bool {
	select {
	case <-lc.dead:
		return true
	default:
		return false
	}
}

// receive reads notifications until the connection breaks or is closed,
// pinging it when it has been silent for pingInterval.
func (lc *listenConn) receive() {
	defer lc.l.wg.Done()
	defer closeConn(lc.conn)
	defer lc.kill()
	for {
		wctx, cancel := context.WithTimeout(lc.ctx, lc.l.pingInterval)
		n, err := lc.conn.WaitForNotification(wctx)
		cancel()
		if err == nil {
			lc.deliver(n.Payload)
			continue
		}
		if lc.ctx.Err() != nil || lc.conn.IsClosed() || !errors.Is(err, context.DeadlineExceeded) {
			return
		}
		pctx, cancel := context.WithTimeout(lc.ctx, lc.l.pingTimeout)
		err = lc.conn.Ping(pctx)
		cancel()
		if err != nil {
			return
		}
	}
}

// deliver wakes the watches on the key a release notified.
func (lc *listenConn) deliver(id string) {
	lc.l.mu.Lock()
	defer lc.l.mu.Unlock()
	for w := range lc.keys[id] {
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
}

// kill marks the connection dead and closes every watch on it.
func (lc *listenConn) kill() {
	l := lc.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if lc.isDead() {
		return
	}
	close(lc.dead)
	for _, ws := range lc.keys {
		for w := range ws {
			w.removed = true
			close(w.changed)
		}
	}
	lc.keys = map[string]map[*watch]struct{}{}
	if l.cur == lc {
		l.cur = nil
	}
}

// close stops the listening connection; watches still open are closed.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	lc := l.cur
	l.mu.Unlock()
	if lc != nil {
		lc.cancel()
	}
	l.wg.Wait()
}
