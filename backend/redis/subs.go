package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

// lingerFor is how long a channel stays subscribed after the last waiting
// Lock on it has ended: a key that is contended now is likely contended
// again soon, and a Lock that finds its channel still subscribed needs no
// SUBSCRIBE, no confirmation and no second attempt. Watches made with
// Watch (not for a queued Lock) unsubscribe at once.
const lingerFor = 10 * time.Second

// pingInterval is how long a pub/sub connection may stay silent before it
// is pinged; a second silent interval counts as a broken connection.
const pingInterval = 15 * time.Second

// subscriptions is a Locker's pub/sub: one connection shared by every
// waiting key (one per master with sharded pub/sub on a Cluster, since a
// shard channel is served only by the master of its slot). Channels are
// reference-counted: the first watch of a channel subscribes, the last one
// to close unsubscribes.
//
// A watch is returned only once the server has confirmed its subscription,
// so no release published afterwards can be missed. When a connection
// breaks, every watch on it is closed (the portable layer then re-watches
// and retries), and the next watch makes a new connection.
type subscriptions struct {
	client  goredis.UniversalClient
	cluster *goredis.ClusterClient // set when channels are sharded per master

	mu     sync.Mutex
	conns  map[string]*subConn // by master address; "" for the single connection
	closed bool
	wg     sync.WaitGroup // receive loops
}

func newSubscriptions(client goredis.UniversalClient, shardedCluster *goredis.ClusterClient) *subscriptions {
	return &subscriptions{client: client, cluster: shardedCluster, conns: map[string]*subConn{}}
}

// watch subscribes to channel (or joins the existing subscription) and
// returns once the subscription is confirmed. With owner set, the watch
// hears only the messages addressed to owner (and those addressed to
// nobody, see addressed); with linger, the subscription outlives the last
// watch by lingerFor.
func (s *subscriptions) watch(ctx context.Context, channel, owner string, linger bool) (*watch, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c, err := s.conn(ctx, channel)
		if err != nil {
			return nil, err
		}
		w, err := c.add(ctx, channel, owner, linger)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = err // the connection broke on the subscribe: try a new one
			continue
		}
		select {
		case <-w.ready:
			return w, nil
		case <-c.dead:
			lastErr = c.cause()
			_ = w.Close()
		case <-ctx.Done():
			_ = w.Close()
			return nil, ctx.Err()
		}
	}
	return nil, driver.Unavailable(fmt.Errorf("redis: subscribing to releases: %w", lastErr))
}

// subscribed reports whether any connection of s has a subscription,
// live or lingering: when none has, joinLive finds nothing, and the caller
// need not make the channel's name.
func (s *subscriptions) subscribed() bool {
	s.mu.Lock()
	var one *subConn
	many := len(s.conns) > 1
	for _, c := range s.conns {
		one = c
	}
	s.mu.Unlock()
	if many {
		return true // a Cluster's: not worth counting
	}
	if one == nil {
		return false
	}
	one.mu.Lock()
	defer one.mu.Unlock()
	return len(one.chans) > 0
}

// joinLive returns a watch on channel for owner (lingering, as watch's)
// when the channel is already subscribed and confirmed on a live
// connection, without any I/O; else nil. A message published after it
// returns is seen.
func (s *subscriptions) joinLive(ctx context.Context, channel, owner string) *watch {
	addr := ""
	if s.cluster != nil {
		node, err := s.cluster.MasterForKey(ctx, channel)
		if err != nil {
			return nil
		}
		addr = node.Options().Addr
	}
	s.mu.Lock()
	c := s.conns[addr]
	closed := s.closed
	s.mu.Unlock()
	if closed || c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isDead() {
		return nil
	}
	sc := c.chans[channel]
	if sc == nil || sc.lastSub == 0 || sc.acked < sc.lastSub {
		return nil
	}
	sc.stopLinger()
	w := &watch{c: c, channel: channel, owner: owner, linger: true, need: sc.lastSub,
		ready: make(chan struct{}), changed: make(chan struct{}, 1)}
	close(w.ready)
	sc.watches[w] = struct{}{}
	return w
}

// conn returns the live connection that serves channel, making it if needed.
func (s *subscriptions) conn(ctx context.Context, channel string) (*subConn, error) {
	addr := ""
	if s.cluster != nil {
		node, err := s.cluster.MasterForKey(ctx, channel)
		if err != nil {
			return nil, err
		}
		addr = node.Options().Addr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, driver.ErrClosed
	}
	c := s.conns[addr]
	if c == nil || c.isDead() {
		c = &subConn{s: s, chans: map[string]*subChan{}, dead: make(chan struct{})}
		// No channel yet, so no I/O: the connection is dialled by the first
		// subscribe, to the master of that channel's slot.
		if s.cluster != nil {
			c.ps = s.cluster.SSubscribe(context.Background())
		} else {
			c.ps = s.client.Subscribe(context.Background())
		}
		s.conns[addr] = c
	}
	return c, nil
}

func (s *subscriptions) close() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = map[string]*subConn{}
	s.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		c.breakLocked(driver.ErrClosed)
		c.mu.Unlock()
	}
	s.wg.Wait()
}

// subConn is one pub/sub connection and the channels it carries.
type subConn struct {
	s    *subscriptions
	ps   *goredis.PubSub
	dead chan struct{} // closed when the connection broke or was closed

	// mu guards the fields below and is held while a (un)subscribe is
	// written, so that commands go out in the order of their sequence
	// numbers and confirmations can be matched to them.
	mu      sync.Mutex
	chans   map[string]*subChan
	started bool // the receive loop runs
	err     error
}

// subChan is one channel on a connection. Subscribe and unsubscribe
// commands for a channel are numbered as they are sent; the server confirms
// them in that order, so acked counts how many it has processed.
type subChan struct {
	watches map[*watch]struct{}
	sent    uint64 // (un)subscribe commands sent
	acked   uint64 // confirmations received
	lastSub uint64 // number of the subscribe in force, 0 when unsubscribed

	lingering *time.Timer // set while subscribed with no watches, see lingerFor
	lingerGen uint64      // bumped when a lingering period ends early
}

// stopLinger ends a lingering period (a new watch came). Called with the
// connection's mu held.
func (sc *subChan) stopLinger() {
	if sc.lingering != nil {
		sc.lingering.Stop()
		sc.lingering = nil
		sc.lingerGen++
	}
}

func (c *subConn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

func (c *subConn) cause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *subConn) send(ctx context.Context, subscribe bool, channel string) error {
	sharded := c.s.cluster != nil
	switch {
	case subscribe && sharded:
		return c.ps.SSubscribe(ctx, channel)
	case subscribe:
		return c.ps.Subscribe(ctx, channel)
	case sharded:
		return c.ps.SUnsubscribe(ctx, channel)
	default:
		return c.ps.Unsubscribe(ctx, channel)
	}
}

// add registers a watch on channel, subscribing if it is the first.
func (c *subConn) add(ctx context.Context, channel, owner string, linger bool) (*watch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &watch{c: c, channel: channel, owner: owner, linger: linger, ready: make(chan struct{}), changed: make(chan struct{}, 1)}
	if c.isDead() {
		// Lost a race with a break: let watch retry on a new connection.
		w.removed = true
		return w, nil
	}
	sc := c.chans[channel]
	if sc == nil {
		sc = &subChan{watches: map[*watch]struct{}{}}
		c.chans[channel] = sc
	}
	sc.stopLinger()
	if sc.lastSub == 0 {
		sc.sent++
		sc.lastSub = sc.sent
		if err := c.send(ctx, true, channel); err != nil {
			c.breakLocked(err)
			return nil, err
		}
		if !c.started {
			c.started = true
			c.s.wg.Add(1)
			go c.receive()
		}
	}
	sc.watches[w] = struct{}{}
	w.need = sc.lastSub
	if sc.acked >= w.need {
		close(w.ready)
	}
	return w, nil
}

// remove drops w; the last watch of a channel unsubscribes, at once or,
// for a lingering watch, after lingerFor unless a new watch comes.
func (c *subConn) remove(w *watch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.removed {
		return
	}
	w.removed = true
	sc := c.chans[w.channel]
	delete(sc.watches, w)
	if len(sc.watches) == 0 && sc.lastSub != 0 {
		if w.linger {
			sc.stopLinger()
			gen := sc.lingerGen
			channel := w.channel
			sc.lingering = time.AfterFunc(lingerFor, func() { c.endLinger(channel, sc, gen) })
			return
		}
		c.unsubscribeLocked(w.channel, sc)
		return
	}
	c.gc(w.channel, sc)
}

// endLinger unsubscribes a channel whose lingering period ran out.
func (c *subConn) endLinger(channel string, sc *subChan, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.isDead() || c.chans[channel] != sc || sc.lingerGen != gen || sc.lingering == nil {
		return
	}
	sc.lingering = nil
	if len(sc.watches) == 0 && sc.lastSub != 0 {
		c.unsubscribeLocked(channel, sc)
	}
}

// unsubscribeLocked sends the unsubscribe of a channel without watches.
// Called with c.mu held.
func (c *subConn) unsubscribeLocked(channel string, sc *subChan) {
	sc.sent++
	sc.lastSub = 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := c.send(ctx, false, channel)
	cancel()
	if err != nil {
		c.breakLocked(err)
		return
	}
	c.gc(channel, sc)
}

// gc forgets a channel with no watches, no subscription in force and no
// confirmation outstanding.
func (c *subConn) gc(channel string, sc *subChan) {
	if len(sc.watches) == 0 && sc.lastSub == 0 && sc.acked == sc.sent {
		delete(c.chans, channel)
	}
}

// breakLocked marks the connection dead, closes every watch on it and the
// connection itself. Called with c.mu held.
func (c *subConn) breakLocked(err error) {
	if c.isDead() {
		return
	}
	c.err = err
	close(c.dead)
	for _, sc := range c.chans {
		sc.stopLinger()
		for w := range sc.watches {
			w.removed = true
			close(w.changed)
		}
	}
	c.chans = map[string]*subChan{}
	_ = c.ps.Close()
}

// receive reads the connection until it breaks or is closed.
func (c *subConn) receive() {
	defer c.s.wg.Done()
	ctx := context.Background()
	pinged := false
	for {
		msg, err := c.ps.ReceiveTimeout(ctx, pingInterval)
		if err != nil {
			if c.isDead() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				pinged = true
				if err = c.ps.Ping(ctx); err == nil {
					continue
				}
			}
			c.mu.Lock()
			c.breakLocked(err)
			c.mu.Unlock()
			return
		}
		pinged = false
		c.handle(msg)
	}
}

func (c *subConn) handle(msg any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch m := msg.(type) {
	case *goredis.Message:
		if sc := c.chans[m.Channel]; sc != nil {
			to, g := addressed(m.Payload)
			for w := range sc.watches {
				if to != "" && w.owner != "" && w.owner != to {
					continue // woken only when it is this waiter's turn
				}
				if g != nil && w.owner == to {
					w.grant.Store(g)
				}
				select {
				case w.changed <- struct{}{}:
				default:
				}
			}
		}
	case *goredis.Subscription:
		sc := c.chans[m.Channel]
		if sc == nil {
			return
		}
		subscribed := m.Kind == "subscribe" || m.Kind == "ssubscribe"
		switch {
		case sc.acked < sc.sent:
			sc.acked++
			if subscribed {
				for w := range sc.watches {
					if sc.acked == w.need {
						close(w.ready)
					}
				}
			}
		case !subscribed:
			// Unsubscribed by the server (a Cluster slot moved away from
			// this master): the watches must be made again elsewhere.
			for w := range sc.watches {
				w.removed = true
				close(w.changed)
			}
			sc.watches = map[*watch]struct{}{}
			sc.lastSub = 0
			sc.stopLinger()
		}
		c.gc(m.Channel, sc)
	}
}

// watch is one waiter's view of a subscribed channel.
type watch struct {
	c       *subConn
	channel string
	owner   string                // hears only messages addressed to it (or to nobody); "" hears all
	linger  bool                  // the last watch's removal lets the subscription linger
	grant   atomic.Pointer[grant] // the last grant of the lock to owner
	need    uint64                // confirmed when the channel's acked reaches need
	ready   chan struct{}         // closed when confirmed
	changed chan struct{}         // a release was published; closed when broken
	removed bool                  // guarded by c.mu
}

var _ driver.Watch = (*watch)(nil)

func (w *watch) Changed() <-chan struct{} { return w.changed }

// grant is a release's grant of the lock to a waiter: its fencing token,
// the server ms from the waiter's last refresh of its queue entry to the
// grant, and the ID of the attempt that made that refresh.
type grant struct {
	token   uint64
	elapsed int64
	attempt string
}

// granted returns the token of the lock a release handed to the watch's
// owner last, 0 when none was, how long after the owner's last refresh of
// its queue entry the release ran, by the server's clock, and the attempt
// that made that refresh.
func (w *watch) granted() (uint64, time.Duration, string) {
	g := w.grant.Load()
	if g == nil {
		return 0, 0, ""
	}
	return g.token, time.Duration(g.elapsed) * time.Millisecond, g.attempt
}

func (w *watch) Close() error {
	w.c.remove(w)
	return nil
}

// addressed returns the owner a release message wakes and the grant it
// makes (nil for a wake-up only), or "" for a message meant for every
// waiter (a release with nobody queued, a break, a release by an older
// version). Messages are "owner" or a grant (redislua.ParseGrant);
// owners are 32 hex digits (driver.Request.Owner).
func addressed(payload string) (string, *grant) {
	if g, ok := redislua.ParseGrant(payload); ok {
		if !isOwner(g.Member) {
			return "", nil
		}
		return g.Member, &grant{token: g.Token, elapsed: g.Elapsed.Milliseconds(), attempt: g.Attempt}
	}
	if !isOwner(payload) {
		return "", nil
	}
	return payload, nil
}

// isOwner reports whether s is an owner as this backend makes them: 32
// hex digits.
func isOwner(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}
