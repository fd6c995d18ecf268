package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// Scheme is the URL scheme this package registers.
const Scheme = "redlock"

func init() { dlock.Register(Scheme, openURL) }

// Defaults of Config.
const (
	DefaultPrefix  = "dlock:"
	DefaultTimeout = 100 * time.Millisecond
	DefaultDrift   = 0.01
)

// minDrift is the clock-drift factor the portable layer already subtracts
// from every lease (TTL*0.01 + 2ms); a driver can only widen it.
const minDrift = 0.01

// maxDrift bounds the drift factor: past it, most of every lease would be
// given away to drift.
const maxDrift = 0.5

// ErrConfig reports an unusable configuration given to New or NewDriver:
// an even number of instances, fewer than three, a nil or duplicate client,
// a drift factor or timeout out of range.
var ErrConfig = errors.New("redlock: invalid configuration")

// Config tunes a Driver. The zero value means every default.
type Config struct {
	// Prefix is put before every key, counter and channel name this
	// package writes. Default "dlock:". Lockers whose prefixes differ do
	// not see each other's locks (keep one from being a prefix of another).
	Prefix string
	// Timeout bounds each request to one instance. It is further capped at
	// a tenth of the lease, so that a slow or paused instance never eats
	// the validity window. Default 100ms.
	Timeout time.Duration
	// Drift is the clock-drift factor: the validity window of a hold is
	// TTL - TTL*Drift - 2ms from the moment the acquire was sent. At least
	// 0.01 (the Redlock reference's value, the default), below 0.5.
	Drift float64
}

func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < 0 {
		return c, fmt.Errorf("%w: timeout %v is negative", ErrConfig, c.Timeout)
	}
	if c.Drift == 0 {
		c.Drift = DefaultDrift
	}
	if !(c.Drift >= minDrift && c.Drift < maxDrift) {
		return c, fmt.Errorf("%w: drift factor %v outside [%v, %v)", ErrConfig, c.Drift, minDrift, maxDrift)
	}
	return c, nil
}

// Driver is the Redlock driver over N independent Redis masters. Programs
// normally use it through dlock.Open or New; NewDriver and OpenDriver give
// the driver itself, for middleware and for Stats.
type Driver struct {
	cfg    Config
	inst   []*instance
	all    []int // 0..N-1
	quorum int   // N/2 + 1
	owned  bool  // the clients were made by OpenDriver: Close closes them

	// releasing maps a key to the done channel of this Driver's last
	// release of it while some instance has not answered that release
	// yet (see trailRelease).
	releasing sync.Map

	ops gate.Gate // acquire attempts in flight (maxInFlight)

	closeOnce sync.Once
	closed    chan struct{}
	life      context.Context // cancelled by Close: ends background work
	endLife   context.CancelFunc

	inbox string // this Driver's inbox: its waiters are woken on the channel P + "i:" + inbox

	mu       sync.Mutex
	isClosed bool
	hub      []*hub // one per instance, started by the first Watch
	// The inbox subscription on each hub (see inboxReady).
	inboxSub  *watch
	subReady  []bool
	subBusy   []bool // the first attempt of a subscription is in flight
	subLoop   []bool // a subscribeInbox runs for the instance
	subState  []error
	subChange chan struct{}  // closed and replaced when a subscription ends
	subWG     sync.WaitGroup // the subscribeInbox goroutines
	// The keys waited for, by key and by queue member.
	attempts atomic.Uint64 // attempts made, for their IDs
	waiting  map[string]*keyWatch
	members  map[string]*keyWatch
	ended    map[string]endedMember // members whose wait ended (see route)
	// endedOrder is the order in which ended's members were remembered,
	// oldest first, each with its remember's number (see remember).
	endedOrder []endedRef
	endedN     uint64
	seq        uint64
}

var (
	_ driver.Locker  = (*Driver)(nil)
	_ driver.Limiter = (*Driver)(nil)
)

// MaxTTL is the longest lease this backend grants: dlock.MaxTTL, 10
// years. Each instance would take more (PX in int64 milliseconds; the
// scripts' deadlines, server time in ms plus the lease as Lua doubles,
// exact until the year 5138); what binds is the client's arithmetic on a
// time.Duration (the lease rounded up to whole milliseconds overflows near
// 292 years, which made every Lock fail with a 1ms lease), which
// dlock.MaxTTL keeps far from.
const MaxTTL = dlock.MaxTTL

// Limits reports the longest lease, MaxTTL.
func (d *Driver) Limits() driver.Limits { return driver.Limits{MaxTTL: MaxTTL} }

// instance is one Redis master.
type instance struct {
	client *redis.Client
	addr   string
	batch  *batcher

	requests atomic.Uint64
	errors   atomic.Uint64
	timeouts atomic.Uint64
}

// InstanceStats counts the requests a Driver sent to one instance.
type InstanceStats struct {
	Addr     string // the client's address
	Requests uint64 // requests sent (acquire, fence, renew, release)
	Errors   uint64 // requests that failed or went unanswered, timeouts included
	Timeouts uint64 // requests that ran out of the per-instance timeout
}

// New returns a Locker over clients, one per independent Redis master. N
// must be odd and at least 3. The clients stay the caller's: Close on the
// Locker does not close them. Clients made with ContextTimeoutEnabled give
// up on a request when its per-instance timeout ends; others are abandoned
// at that point and finish in the background.
func New(clients []*redis.Client, cfg Config, opts ...dlock.Option) (*dlock.Locker, error) {
	d, err := NewDriver(clients, cfg)
	if err != nil {
		return nil, err
	}
	return dlock.NewLocker(d, opts...)
}

// NewDriver returns the driver over clients without wrapping it in the
// portable Locker (see dlock.NewLocker). The clients stay the caller's.
func NewDriver(clients []*redis.Client, cfg Config) (*Driver, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := len(clients)
	if n < 3 || n%2 == 0 {
		return nil, fmt.Errorf("%w: Redlock needs an odd number of instances, at least 3; got %d", ErrConfig, n)
	}
	d := &Driver{cfg: cfg, quorum: n/2 + 1, ops: gate.New(maxInFlight), closed: make(chan struct{}), inbox: newInbox(),
		waiting: map[string]*keyWatch{}, members: map[string]*keyWatch{}, ended: map[string]endedMember{}}
	d.life, d.endLife = context.WithCancel(context.Background())
	seen := map[string]bool{}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: client %d is nil", ErrConfig, i)
		}
		addr := c.Options().Addr
		// Sentinel failover clients all report the same placeholder address.
		if addr != "FailoverClient" && seen[addr] {
			return nil, fmt.Errorf("%w: instance %s given twice (a duplicate would count twice towards the quorum)", ErrConfig, addr)
		}
		seen[addr] = true
		for _, o := range d.inst {
			if o.client == c {
				return nil, fmt.Errorf("%w: client %d given twice", ErrConfig, i)
			}
		}
		in := &instance{client: c, addr: addr}
		in.batch = &batcher{client: c, in: in, index: i, life: d.life}
		d.inst = append(d.inst, in)
		d.all = append(d.all, i)
	}
	return d, nil
}

// Quorum returns the number of instances a hold needs: N/2 + 1.
func (d *Driver) Quorum() int { return d.quorum }

// Stats returns the request counters of each instance, in the order the
// clients or hosts were given.
func (d *Driver) Stats() []InstanceStats {
	out := make([]InstanceStats, len(d.inst))
	for i, in := range d.inst {
		out[i] = InstanceStats{
			Addr:     in.addr,
			Requests: in.requests.Load(),
			Errors:   in.errors.Load(),
			Timeouts: in.timeouts.Load(),
		}
	}
	return out
}

func (d *Driver) check(ctx context.Context) error {
	select {
	case <-d.closed:
		return driver.ErrClosed
	default:
	}
	return ctx.Err()
}

// Close stops the driver's subscriptions, lets the requests still on
// their way finish (for at most the per-instance timeout) and, when it
// opened them from a URL, closes its clients.
func (d *Driver) Close() error {
	var err error
	d.closeOnce.Do(func() {
		close(d.closed)
		// Requests still on their way (releases the portable layer did not
		// wait for, undoing of late grants) end within their timeout.
		deadline := time.Now().Add(d.cfg.Timeout + 100*time.Millisecond)
		d.mu.Lock()
		d.isClosed = true
		hubs := d.hub
		for _, kw := range d.waiting {
			kw.stopGrace()
		}
		d.mu.Unlock()
		for _, h := range hubs {
			h.close()
		}
		var errs []error
		d.endLife()
		d.subWG.Wait()
		for _, in := range d.inst {
			in.batch.drain(deadline)
			in.batch.warmers.Wait()
			if d.owned {
				errs = append(errs, in.client.Close())
			}
		}
		err = errors.Join(errs...)
	})
	return err
}

// newInbox returns a random inbox name: letters and digits.
func newInbox() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxInFlight bounds the acquire attempts of one Driver that may have
// requests on the instances at once (see package gate): the pipelines
// take every queued acquire, so a burst of thousands of Locks otherwise
// put each instance a thousand requests of this client behind, and the
// burst's own acquires ran out of the per-instance timeout. Releases and
// renewals are not held back: they go first in the pipelines already.
const maxInFlight = gate.Acquires
