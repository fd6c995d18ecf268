package consul

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// Scheme is the URL scheme this package registers.
const Scheme = "consul"

func init() { dlock.Register(Scheme, open) }

// Defaults.
const (
	// DefaultPrefix is the KV prefix lock keys live under.
	DefaultPrefix = "dlock"
	// DefaultLockDelay is Consul's own default session lock-delay.
	DefaultLockDelay = 15 * time.Second
	// DefaultMonitors is how many holds of one Locker are watched by a
	// blocking query at a time (see the package documentation).
	DefaultMonitors = 64
	// MaxLockDelay is the largest lock-delay Consul honours.
	MaxLockDelay = 60 * time.Second
)

// Session TTL limits enforced by Consul agents by default
// (session_ttl_min, and the hard maximum).
const (
	MinTTL = 10 * time.Second
	MaxTTL = 24 * time.Hour
)

// Connections a Locker opens when it makes its own client (Open,
// NewFromConfig): at most maxRequestConns for ordinary requests, plus one
// per monitor and per waiting key for blocking queries. Consul accepts 200
// connections per client address by default (http_max_conns_per_client).
const maxRequestConns = 32

// idleConnTimeout closes connections left idle after a burst soon, so that
// they stop counting against the agent's per-client connection limit.
const idleConnTimeout = 3 * time.Second

// bgTimeout bounds a background cleanup request (destroying a session).
const bgTimeout = 5 * time.Second

// Config configures a Locker made by New or NewFromConfig. The zero value
// means every default.
type Config struct {
	// Prefix is the KV prefix under which lock keys are stored ("" means
	// DefaultPrefix, "dlock"). It is a slash-separated path of
	// [A-Za-z0-9._-] segments. URL: the path, consul://host:8500/my/prefix.
	Prefix string
	// LockDelay is the lock-delay of the sessions the Locker creates (0
	// means DefaultLockDelay, 15s, Consul's own default; a negative value
	// turns it off; at most 60s). See the package documentation for what
	// it protects. URL: lockdelay=15s (lockdelay=0 turns it off).
	LockDelay time.Duration
	// Monitors is how many holds of the Locker are watched at a time by a
	// blocking query, so that a session destroyed or a key deleted from
	// outside is noticed at once (0 means DefaultMonitors, 64; a negative
	// value means none). Holds beyond that notice the loss at their next
	// renewal instead (within TTL/3). URL: monitors=64 (monitors=0 for
	// none).
	Monitors int
	// SessionPerHold gives every hold a session of its own instead of one
	// session per TTL shared by all the holds of the Locker (see "Sessions"
	// in the package documentation). URL: session_per_hold=true.
	SessionPerHold bool
}

// resolve applies the defaults.
func (c Config) resolve() config {
	out := defaultConfig()
	if c.Prefix != "" {
		out.prefix = c.Prefix
	}
	switch {
	case c.LockDelay < 0:
		out.lockDelay = 0
	case c.LockDelay > 0:
		out.lockDelay = c.LockDelay
	}
	switch {
	case c.Monitors < 0:
		out.monitors = 0
	case c.Monitors > 0:
		out.monitors = c.Monitors
	}
	out.sessionPerHold = c.SessionPerHold
	return out
}

// config is the resolved Config (and what a URL says).
type config struct {
	prefix         string
	lockDelay      time.Duration
	monitors       int
	sessionPerHold bool
}

func defaultConfig() config {
	return config{prefix: DefaultPrefix, lockDelay: DefaultLockDelay, monitors: DefaultMonitors}
}

func (c config) validate() error {
	if !validPrefix(c.prefix) {
		return fmt.Errorf("%w: consul prefix %q: want non-empty segments of [A-Za-z0-9._-] separated by /, and none of them a dot segment",
			dlock.ErrInvalidOption, c.prefix)
	}
	if c.lockDelay < 0 || c.lockDelay > MaxLockDelay {
		return fmt.Errorf("%w: consul lock-delay %v: want at most %v", dlock.ErrInvalidOption, c.lockDelay, MaxLockDelay)
	}
	if c.monitors < 0 {
		return fmt.Errorf("%w: consul monitors %d: want 0 or more", dlock.ErrInvalidOption, c.monitors)
	}
	return nil
}

// New returns a Locker over a Consul client the caller already has: client
// first, the backend's Config, then dlock's options (the defaults of every
// Mutex made from the Locker), as every backend's constructor over a
// caller's client. The client's address, datacenter, TLS settings and ACL
// token are used as they are. The client stays the caller's: Close of the
// Locker destroys its sessions but leaves the client and its connections
// alone. New does not talk to the agent (an agent that does not answer
// shows in Lock as ErrUnavailable).
func New(client *api.Client, cfg Config, opts ...dlock.Option) (*dlock.Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: consul: New with a nil client", dlock.ErrInvalidOption)
	}
	c := cfg.resolve()
	if err := c.validate(); err != nil {
		return nil, err
	}
	d := newDriver(client, client, nil, c)
	return wrap(d, opts)
}

// NewFromConfig returns a Locker with clients of its own made from apiCfg
// (nil means api.DefaultConfig(), which reads CONSUL_HTTP_ADDR,
// CONSUL_HTTP_TOKEN and the other CONSUL_* variables). apiCfg.HttpClient
// must be nil. The Locker owns these clients: it uses two clones of
// apiCfg.Transport (one for requests, with at most 32 connections, one for
// blocking queries) and closes their connections on Close; apiCfg itself
// is not modified. Like New, it does not talk to the agent.
func NewFromConfig(apiCfg *api.Config, cfg Config, opts ...dlock.Option) (*dlock.Locker, error) {
	c := cfg.resolve()
	if err := c.validate(); err != nil {
		return nil, err
	}
	d, err := newOwnedDriver(apiCfg, c)
	if err != nil {
		return nil, err
	}
	return wrap(d, opts)
}

func wrap(d *consulDriver, opts []dlock.Option) (*dlock.Locker, error) {
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// newOwnedDriver makes the two clients of a driver that owns its
// connections: one for requests, with a bounded number of connections, and
// one for blocking queries, which each hold a connection while they wait.
func newOwnedDriver(cfg *api.Config, c config) (*consulDriver, error) {
	if cfg == nil {
		cfg = api.DefaultConfig()
	}
	if cfg.HttpClient != nil {
		return nil, fmt.Errorf("%w: consul: NewFromConfig needs a Config without HttpClient (use New to bring your own client)",
			dlock.ErrInvalidOption)
	}
	mk := func(maxConns int) (*api.Client, *http.Transport, error) {
		cc := *cfg
		var t *http.Transport
		if cfg.Transport != nil {
			t = cfg.Transport.Clone()
		} else {
			t = api.DefaultConfig().Transport
		}
		t.MaxConnsPerHost = maxConns
		t.MaxIdleConnsPerHost = max(maxConns, 8)
		t.IdleConnTimeout = idleConnTimeout
		// Lock traffic is small and the agent local: gzip would cost
		// each larger answer (a line of waiters) a decompressor's worth
		// of allocation for nothing.
		t.DisableCompression = true
		cc.Transport = t
		cl, err := api.NewClient(&cc)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: consul: %v", dlock.ErrInvalidOption, err)
		}
		return cl, t, nil
	}
	rc, rt, err := mk(maxRequestConns)
	if err != nil {
		return nil, err
	}
	bc, bt, err := mk(0)
	if err != nil {
		return nil, err
	}
	d := newDriver(rc, bc, []*http.Transport{rt, bt}, c)
	d.addr = cfg.Address
	return d, nil
}

// maxInFlight bounds the acquire attempts of one Locker that may have
// requests on the agent at once (see package gate). Session renewals go
// through the same agent and the same Raft log as the acquisitions: a
// burst of 5,000 Locks on one Locker kept a 10s hold's session renewal
// waiting until its window had run out, and the hold was given up
// (TestBurstKeepsHolds). Releases are not held back: the portable layer
// stops renewing a hold before it releases it, so a release that waited
// for a turn behind a burst could find its hold run out.
const maxInFlight = gate.Acquires

// consulDriver implements driver.Locker over Consul sessions and KV.
type consulDriver struct {
	c         *api.Client // requests
	bc        *api.Client // blocking queries (monitors, watches)
	owned     []*http.Transport
	addr      string // agent address, for messages
	prefix    string
	lockDelay time.Duration
	monSem    chan struct{}   // one token per running monitor
	pool      pool            // sessions of their own (SessionPerHold)
	shared    *sharedSessions // shared sessions; nil with SessionPerHold
	fair      fairness
	ops       gate.Gate // acquire attempts in flight

	linesMu sync.Mutex
	lines   map[string]*line // the keys a Lock of this Locker waits on (queue.go)

	ctx    context.Context // ends monitors and watches on Close
	cancel context.CancelFunc
	closed atomic.Bool

	bgMu   sync.Mutex
	bgCond *sync.Cond
	bgN    int  // running background goroutines
	bgDone bool // Close has waited for them; no new ones start
}

var (
	_ driver.Locker       = (*consulDriver)(nil)
	_ driver.Limiter      = (*consulDriver)(nil)
	_ driver.LossNotifier = (*consulDriver)(nil)
)

func newDriver(c, bc *api.Client, owned []*http.Transport, cfg config) *consulDriver {
	ctx, cancel := context.WithCancel(context.Background())
	d := &consulDriver{
		c:         c,
		bc:        bc,
		owned:     owned,
		prefix:    cfg.prefix,
		lockDelay: cfg.lockDelay,
		monSem:    make(chan struct{}, cfg.monitors),
		ops:       gate.New(maxInFlight),
		ctx:       ctx,
		cancel:    cancel,
	}
	d.pool = pool{d: d, idle: map[time.Duration][]idleSession{}}
	if !cfg.sessionPerHold {
		d.shared = newSharedSessions(d)
	}
	d.fair = fairness{keys: map[string]*contention{}}
	d.lines = map[string]*line{}
	d.bgCond = sync.NewCond(&d.bgMu)
	return d
}

// Limits reports Consul's session TTL range.
func (d *consulDriver) Limits() driver.Limits {
	return driver.Limits{MinTTL: MinTTL, MaxTTL: MaxTTL}
}

// path is the KV path of a user key.
func (d *consulDriver) path(key string) string { return d.prefix + "/" + encodeKey(key) }

func (d *consulDriver) check(ctx context.Context) error {
	if d.closed.Load() {
		return driver.ErrClosed
	}
	return ctx.Err()
}

// goTracked runs f in a goroutine that Close waits for. It reports false,
// without running f, once Close has finished waiting.
func (d *consulDriver) goTracked(f func()) bool {
	d.bgMu.Lock()
	if d.bgDone {
		d.bgMu.Unlock()
		return false
	}
	d.bgN++
	d.bgMu.Unlock()
	go func() {
		defer func() {
			d.bgMu.Lock()
			d.bgN--
			if d.bgN == 0 {
				d.bgCond.Broadcast()
			}
			d.bgMu.Unlock()
		}()
		f()
	}()
	return true
}

// background runs a cleanup request with a context of its own, bounded by
// bgTimeout, that survives the caller's context and Close.
func (d *consulDriver) background(f func(ctx context.Context)) {
	d.goTracked(func() {
		ctx, cancel := context.WithTimeout(context.Background(), bgTimeout)
		defer cancel()
		f(ctx)
	})
}

// Close destroys idle and shared sessions, stops monitors and watches, waits for
// background cleanup, and closes the connections of clients it made.
func (d *consulDriver) Close() error {
	if d.closed.Swap(true) {
		return nil
	}
	d.pool.close()
	if d.shared != nil {
		d.shared.close()
	}
	d.cancel()
	d.bgMu.Lock()
	for d.bgN > 0 {
		d.bgCond.Wait()
	}
	d.bgDone = true
	d.bgMu.Unlock()
	for _, t := range d.owned {
		t.CloseIdleConnections()
	}
	return nil
}
