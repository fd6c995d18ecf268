package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// Scheme is the URL scheme this package registers.
const Scheme = "etcd"

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = "dlock/"

// MinTTL is the shortest lease etcd 3.4 grants with its default election
// timeout: it raises shorter leases to ceil(1.5 * election timeout) = 2s
// without telling the client, so dlock refuses them when a Mutex is made.
const MinTTL = 2 * time.Second

// MaxTTL is the longest lease this backend grants: dlock.MaxTTL, 10
// years (315,360,000 s). etcd refuses a lease above 9,000,000,000 s (its
// lease.MaxLeaseTTL, about 285 years) with a bare "too large lease TTL",
// and the Locker's lease pool, which weighs a lease's age against three
// quarters of its TTL (3*TTL/4), overflows above 97 years: a released
// lease then looked about to expire and was dropped without a revoke.
// dlock refuses anything above MaxTTL when the Mutex is made instead,
// naming the limit.
const MaxTTL = dlock.MaxTTL

// DefaultDialTimeout bounds how long Open waits for the cluster to answer.
const DefaultDialTimeout = 5 * time.Second

// cleanupTimeout bounds the best-effort cleanup done with a fresh context
// after the caller's ended (a waiter's queue entry, an ambiguous acquire):
// long enough to outlast a leader election.
const cleanupTimeout = 3 * time.Second

func init() { dlock.Register(Scheme, open) }

// Config configures a Locker made by New. The zero value is usable.
type Config struct {
	// Prefix is the key prefix the locks live under ("" means
	// DefaultPrefix; a "/" is appended if missing). URL: the path,
	// etcd://host:2379/PREFIX.
	Prefix string
	// LeasePerHold gives every hold and waiter a lease of its own (kept in
	// a pool and reused), as before leases were shared. By default the
	// holds of a Locker share one lease per TTL, so that many holds cost
	// one keepalive per renewal interval, not one each; the price is that
	// a shared lease that ends (revoked, or expired while the client was
	// cut off) ends every hold on it, each with its own Done. URL:
	// lease_per_hold=true.
	LeasePerHold bool
}

// New returns a Locker that keeps its locks in the etcd cluster cli talks
// to. cli stays the caller's: Close of the Locker releases its locks and
// revokes its leases but does not close cli, which the caller closes after
// the Locker. New does not talk to the cluster (a cluster that does not
// answer shows in Lock as ErrUnavailable). The options set the defaults of
// every Mutex made from the Locker.
func New(cli *clientv3.Client, cfg Config, opts ...dlock.Option) (*dlock.Locker, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: etcd: New with a nil client", dlock.ErrInvalidOption)
	}
	return dlock.NewLocker(newDriver(cli, cfg, false), opts...)
}

// open is the OpenFunc for etcd:// URLs.
func open(ctx context.Context, u *url.URL) (driver.Locker, error) {
	cfg, own, err := parseURLConfig(u)
	if err != nil {
		return nil, err
	}
	prefix := own.Prefix
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, driver.Unavailable(err)
	}
	// clientv3.New does not wait for a connection; one read of the
	// namespace does, and also checks credentials and quorum. A member
	// without a leader refuses it at once and the client reads from
	// another (see noLeader).
	pctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), cfg.DialTimeout)
	defer cancel()
	if _, err := cli.Get(pctx, prefix, clientv3.WithKeysOnly()); err != nil {
		_ = cli.Close()
		if ctx.Err() == nil && pctx.Err() != nil {
			err = fmt.Errorf("no answer within dial_timeout %v: %w", cfg.DialTimeout, err)
		}
		if e := mapErr(context.Background(), err); errors.Is(e, driver.ErrUnavailable) {
			return nil, fmt.Errorf("%w: etcd %s: %w", driver.ErrUnavailable, strings.Join(cfg.Endpoints, ","), err)
		} else {
			return nil, e
		}
	}
	return newDriver(cli, own, true), nil
}

// parseURL reads etcd://[user:password@]host:port[,host:port...][/prefix][?params].
func parseURL(u *url.URL) (clientv3.Config, string, error) {
	cfg, own, err := parseURLConfig(u)
	return cfg, own.Prefix, err
}

// parseURLConfig is parseURL with the driver's own settings.
func parseURLConfig(u *url.URL) (clientv3.Config, Config, error) {
	var cfg clientv3.Config
	var own Config
	if u.Opaque != "" {
		return cfg, own, fmt.Errorf("%w: etcd URL must be etcd://host:port[,host:port...]/prefix, got opaque %q", driver.ErrInvalidURL, u.Opaque)
	}
	if u.Fragment != "" {
		return cfg, own, fmt.Errorf("%w: etcd URL has a fragment %q", driver.ErrInvalidURL, u.Fragment)
	}
	hosts, err := driver.Hosts(u, "2379")
	if err != nil {
		return cfg, own, err
	}
	p := driver.NewParams(u)
	dial := p.Duration("dial_timeout", DefaultDialTimeout)
	own.LeasePerHold = p.Bool("lease_per_hold", false)
	if err := p.Done(); err != nil {
		return cfg, own, err
	}
	if dial <= 0 {
		return cfg, own, fmt.Errorf("%w: dial_timeout must be positive, got %v", driver.ErrInvalidURL, dial)
	}
	cfg = clientv3.Config{
		Endpoints:   hosts,
		DialTimeout: dial,
		Logger:      zap.NewNop(),
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		if cfg.Username == "" {
			return cfg, own, fmt.Errorf("%w: etcd URL has credentials without a user name", driver.ErrInvalidURL)
		}
	}
	own.Prefix = normPrefix(strings.TrimPrefix(u.Path, "/"))
	return cfg, own, nil
}

// drv is the driver: one etcd client and the Locker's lease pool.
type drv struct {
	cli    *clientv3.Client
	owned  bool // Close closes cli
	prefix string
	leases *leasePool
	ops    gate.Gate // acquisitions with requests in flight

	ctx    context.Context // cancelled by Close: ends every watch
	cancel context.CancelFunc
	// leaderCtx is ctx with clientv3.WithRequireLeader, made once: the
	// parent of every watch, which then fails when its member loses the
	// leader instead of waiting silently.
	leaderCtx context.Context
	// lossCtx is leaderCtx with metadata of its own, so that the loss
	// watch runs on a gRPC stream of its own (see lossWatch).
	lossCtx   context.Context
	calls     context.Context // cancelled when Close begins: ends calls in flight
	stopCalls context.CancelFunc
	closed    chan struct{}

	mu       sync.Mutex
	isClosed bool
	running  sync.WaitGroup // calls in flight
	watchers sync.WaitGroup // the loss watch and its checks, background cleanups
	loss     *lossWatch
	live     sync.Map    // entry key -> create revision, of this driver's waiters and holds
	preds    predWatches // idle predecessor watches
}

var (
	_ driver.Locker       = (*drv)(nil)
	_ driver.Acquirer     = (*drv)(nil)
	_ driver.Limiter      = (*drv)(nil)
	_ driver.LossNotifier = (*drv)(nil)
	_ driver.BatchRenewer = (*drv)(nil)
)

// maxInFlight bounds the acquisitions of one Locker that may have
// requests on the cluster at once (see package gate). Every write
// goes through the one Raft log, and a keepalive extends a lease only once
// a consensus response asked for after it confirms it (see extension): a
// burst of 5,000 Locks on one Locker, each an enqueue transaction and a
// guarded delete, kept the shared lease from being confirmed for longer
// than its 30s TTL. The Locker's earlier hold was given up, 3,510 of the
// Locks failed, and the burst took 99s; with the gate, none failed, the
// hold was kept, and it took 7s (TestBurstKeepsHolds). Releases are not
// held back: they come no faster than the acquisitions that made their
// holds, and the portable layer stops renewing a hold before it releases
// it, so a release that waited for a turn behind a burst could find its
// lease run out.
const maxInFlight = gate.Acquires

func newDriver(cli *clientv3.Client, cfg Config, owned bool) *drv {
	ctx, cancel := context.WithCancel(context.Background())
	calls, stopCalls := context.WithCancel(context.Background())
	d := &drv{
		cli:       cli,
		owned:     owned,
		prefix:    normPrefix(cfg.Prefix),
		leases:    newLeasePool(cli, !cfg.LeasePerHold),
		ctx:       ctx,
		cancel:    cancel,
		leaderCtx: clientv3.WithRequireLeader(ctx),
		calls:     calls,
		stopCalls: stopCalls,
		closed:    make(chan struct{}),
		ops:       gate.New(maxInFlight),
	}
	d.lossCtx = metadata.AppendToOutgoingContext(d.leaderCtx, "dlock-watch", "loss")
	d.loss = newLossWatch(d)
	d.leases.sweep = d.sweep
	return d
}

// Limits reports etcd's lease bounds: whole seconds from MinTTL to MaxTTL.
func (d *drv) Limits() driver.Limits { return driver.Limits{MinTTL: MinTTL, MaxTTL: MaxTTL} }

// enter registers a call that Close waits for; it fails once the driver is
// closed or ctx has ended. The call runs with the returned context, which
// Close cancels, and must end with leave(&err): a call cut short by Close
// returns ErrClosed.
func (d *drv) enter(ctx context.Context) (context.Context, func(*error), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	if d.isClosed {
		d.mu.Unlock()
		return nil, nil, driver.ErrClosed
	}
	d.running.Add(1)
	d.mu.Unlock()
	// Require a leader: a member cut off from its peers refuses at once
	// (see noLeader) rather than holding the call for its request timeout.
	cctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	stop := context.AfterFunc(d.calls, cancel)
	return cctx, func(errp *error) {
		stop()
		cancel()
		if *errp != nil && ctx.Err() == nil && d.isDone() {
			*errp = driver.ErrClosed
		}
		d.running.Done()
	}, nil
}

// Close stops waiters (they remove their queue entries first), revokes the
// idle leases and, when the driver made the client, closes it.
func (d *drv) Close() error {
	d.mu.Lock()
	if d.isClosed {
		d.mu.Unlock()
		return nil
	}
	d.isClosed = true
	close(d.closed)
	d.stopCalls()
	d.mu.Unlock()

	d.running.Wait() // waiters remove their queue entries first
	d.preds.closeIdle()
	d.cancel() // ends the loss watchers of holds not released
	d.watchers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	d.leases.drain(ctx)
	cancel()
	if d.owned {
		return d.cli.Close()
	}
	return nil
}
