package benchpeers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/go-zookeeper/zk"
	consulapi "github.com/hashicorp/consul/api"
	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/consul" // consul://
	_ "github.com/dlock-go/dlock/backend/etcd"   // etcd://
	_ "github.com/dlock-go/dlock/backend/file"   // file://
	_ "github.com/dlock-go/dlock/backend/memory" // mem://
	dlockredis "github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/backend/redlock"
	_ "github.com/dlock-go/dlock/backend/zookeeper" // zk://
	"github.com/dlock-go/dlock/driver"
)

// Endpoints are the servers a run uses; an empty one leaves out every
// system on it.
type Endpoints struct {
	Redis   string `json:"redis,omitempty"`   // redis://host:port
	Redlock string `json:"redlock,omitempty"` // redlock://h1,h2,...
	Etcd    string `json:"etcd,omitempty"`    // etcd://host:port
	ZK      string `json:"zk,omitempty"`      // zk://host:port
	Consul  string `json:"consul,omitempty"`  // consul://host:port
	Mem     bool   `json:"mem,omitempty"`     // mem:// (in-process only)
	File    string `json:"file,omitempty"`    // file:///dir (one host)
}

// A system is one lock implementation on one store: dlock over a backend,
// or a peer library.
type system struct {
	name  string
	dlock bool   // a dlock backend (many holds run only on these)
	store string // "redis", "redlock", "etcd", "zk", "consul", "mem", "file": which counter applies
	// inProcess: the contended workers are goroutines of this process,
	// each with its own client (mem:// has no server to share across
	// processes).
	inProcess bool
	// uncontendedOnly: the system runs in the uncontended scenario only
	// (a read-write lock's read and write, whose cost beside the Mutex
	// is what the report shows).
	uncontendedOnly bool
	open            func(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error)
}

// client is one connection (or set of connections) of one system, as
// one process would hold it.
type client interface {
	// lock acquires key, waiting as long as ctx allows, and returns the
	// function that releases it.
	lock(ctx context.Context, key string) (unlock func(context.Context) error, err error)
	// roundTrips is the number of requests the client has sent (Redis:
	// commands and pipelines counted by a go-redis hook); -1 when it
	// cannot be counted.
	roundTrips() int64
	close() error
}

// holder is a client that can also keep a hold and report whether it was
// lost (dlock only).
type holder interface {
	client
	hold(ctx context.Context, key string) (*dlock.Mutex, error)
}

// Systems in report order: each dlock system follows the peers on its store.
var systems = []system{
	{name: "bare SET NX PX spin lock, 10 ms retry", store: "redis", open: openBare},
	{name: "fenced SET NX PX spin lock (INCR token), 10 ms retry", store: "redis", open: openFenced},
	{name: "bsm/redislock, 10 ms retry", store: "redis", open: openRedislock},
	{name: "redsync (single Redis)", store: "redis", open: openRedsyncSingle},
	{name: "dlock redis://", dlock: true, store: "redis", open: openDlockRedis},
	{name: "redsync Redlock (5 masters)", store: "redlock", open: openRedsyncRedlock},
	{name: "dlock redlock:// (5 masters)", dlock: true, store: "redlock", open: openDlockRedlock},
	{name: "etcd concurrency.Mutex", store: "etcd", open: openEtcdMutex},
	{name: "dlock etcd://", dlock: true, store: "etcd", open: openDlockURL(func(ep Endpoints) string { return ep.Etcd })},
	{name: "go-zookeeper zk.Lock", store: "zk", open: openZKLock},
	{name: "dlock zk://", dlock: true, store: "zk", open: openDlockURL(func(ep Endpoints) string { return ep.ZK })},
	{name: "Consul api.Lock", store: "consul", open: openConsulLock},
	{name: "dlock consul://", dlock: true, store: "consul", open: openDlockURL(func(ep Endpoints) string { return ep.Consul })},
	{name: "dlock file://", dlock: true, store: "file", open: openDlockURL(func(ep Endpoints) string { return ep.File })},
	{name: "dlock mem://", dlock: true, store: "mem", inProcess: true, open: openDlockMem},
}

// rwReaders is the number of readers of the read-write lock systems.
const rwReaders = 4

// The read-write lock (dlock.RWMutex) of every dlock system, a write and a
// read, uncontended, each right after its store's Mutex: their round
// trips and server requests per acquisition beside the Mutex's.
func init() {
	var all []system
	for _, s := range systems {
		all = append(all, s)
		if !s.dlock {
			continue
		}
		for _, read := range []bool{false, true} {
			kind := "write"
			if read {
				kind = "read"
			}
			r := s
			r.name = fmt.Sprintf("%s RWMutex %s (%d readers)", s.name, kind, rwReaders)
			r.uncontendedOnly = true
			r.open = rwOpen(s.open, read)
			all = append(all, r)
		}
	}
	systems = all
}

// rwOpen opens a dlock system's client for its read-write lock, as a
// writer or a reader.
func rwOpen(open func(context.Context, Endpoints, time.Duration) (client, error), read bool) func(context.Context, Endpoints, time.Duration) (client, error) {
	return func(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
		c, err := open(ctx, ep, ttl)
		if err != nil {
			return nil, err
		}
		d := c.(*dlockClient)
		d.rw, d.rwRead = rwReaders, read
		return d, nil
	}
}

func openDlockMem(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	return openDlockURL(func(ep Endpoints) string {
		if ep.Mem {
			return "mem://benchpeers"
		}
		return ""
	})(ctx, ep, ttl)
}

// peerOf names, for each dlock system (and the reference below), the peers
// its ratios are taken against. The fenced spin lock is no library but a reference: the bare
// lock with a fencing token and nothing else, so that a run shows what the
// token alone costs and what dlock's other work costs on top of it.
var peerOf = map[string][]string{
	"dlock redis://": {"bare SET NX PX spin lock, 10 ms retry", "bsm/redislock, 10 ms retry", "redsync (single Redis)",
		"fenced SET NX PX spin lock (INCR token), 10 ms retry"},
	"fenced SET NX PX spin lock (INCR token), 10 ms retry": {"bare SET NX PX spin lock, 10 ms retry"},
	"dlock redlock:// (5 masters)":                         {"redsync Redlock (5 masters)"},
	"dlock etcd://":                                        {"etcd concurrency.Mutex"},
	"dlock zk://":                                          {"go-zookeeper zk.Lock"},
	"dlock consul://":                                      {"Consul api.Lock"},
}

func systemByName(name string) (system, bool) {
	for _, s := range systems {
		if s.name == name {
			return s, true
		}
	}
	return system{}, false
}

// available reports whether the endpoints name the system's store.
func (s system) available(ep Endpoints) bool {
	switch s.store {
	case "redis":
		return ep.Redis != ""
	case "redlock":
		return ep.Redlock != ""
	case "etcd":
		return ep.Etcd != ""
	case "zk":
		return ep.ZK != ""
	case "consul":
		return ep.Consul != ""
	case "mem":
		return ep.Mem
	case "file":
		return ep.File != ""
	}
	return false
}

// hosts returns the host:port list of a URL.
func hosts(rawURL, defPort string) ([]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	return driver.Hosts(u, defPort)
}

// counting is a go-redis hook that counts round trips: one per command
// sent alone, one per pipeline.
type counting struct{ n *atomic.Int64 }

func (c counting) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (c counting) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c counting) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// redisClients opens one go-redis client per host for a peer, each
// counted into n.
func redisClients(rawURL string, n *atomic.Int64) ([]*goredis.Client, error) {
	return redisClientsWith(rawURL, n, func(h string) *goredis.Options {
		return &goredis.Options{Addr: h, PoolSize: 64}
	})
}

// dlockRedisOptions are the options redis:// gives its client: requests
// end with their context's deadline.
func dlockRedisOptions(h string) *goredis.Options {
	return &goredis.Options{Addr: h, ContextTimeoutEnabled: true}
}

// dlockRedlockOptions are the options redlock:// gives each instance's
// client: requests end with their per-instance timeout, and retries belong
// to the Redlock loop.
func dlockRedlockOptions(h string) *goredis.Options {
	return &goredis.Options{Addr: h, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1}
}

// redisClientsWith opens one go-redis client per host with the options
// opts gives, each counted into n.
func redisClientsWith(rawURL string, n *atomic.Int64, opts func(host string) *goredis.Options) ([]*goredis.Client, error) {
	hs, err := hosts(rawURL, "6379")
	if err != nil {
		return nil, err
	}
	var cs []*goredis.Client
	for _, h := range hs {
		c := goredis.NewClient(opts(h))
		c.AddHook(counting{n})
		cs = append(cs, c)
	}
	return cs, nil
}

func closeAll(cs []*goredis.Client) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// ttlOr is the lease a peer is given: the run's, else dlock's default.
func ttlOr(ttl time.Duration) time.Duration {
	if ttl > 0 {
		return ttl
	}
	return dlock.DefaultTTL
}

func randomValue() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- bare SET NX PX spin lock, and the same with a fencing token ----

// bareClient is the bare spin lock; with fenced, the reference that adds a
// fencing token to it: SET NX PX and, when it took the lock, INCR of a
// counter, in one script (fencedLock). That token is the counter's next
// value, which a counter lost with the server (a restart without
// persistence, a failover to a replica that missed the last increments)
// lets repeat.
type bareClient struct {
	c      *goredis.Client
	n      *atomic.Int64
	ttl    time.Duration
	fenced bool
}

var (
	bareUnlock = goredis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0`)
	fencedLock = goredis.NewScript(`if redis.call("set", KEYS[1], ARGV[1], "NX", "PX", ARGV[2]) then return redis.call("incr", KEYS[2]) end return 0`)
)

func openBare(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	n := new(atomic.Int64)
	cs, err := redisClients(ep.Redis, n)
	if err != nil {
		return nil, err
	}
	return &bareClient{c: cs[0], n: n, ttl: ttlOr(ttl)}, nil
}

func openFenced(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	c, err := openBare(ctx, ep, ttl)
	if err != nil {
		return nil, err
	}
	c.(*bareClient).fenced = true
	return c, nil
}

// take makes one attempt on key with owner value v.
func (b *bareClient) take(ctx context.Context, key, v string) (bool, error) {
	if !b.fenced {
		return b.c.SetNX(ctx, key, v, b.ttl).Result()
	}
	token, err := fencedLock.Run(ctx, b.c, []string{key, key + ":token"}, v, b.ttl.Milliseconds()).Int64()
	return token > 0, err
}

func (b *bareClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	v := randomValue()
	if b.fenced {
		key = "{benchpeers:fenced:" + key + "}"
	} else {
		key = "benchpeers:bare:" + key
	}
	for {
		ok, err := b.take(ctx, key, v)
		if err != nil {
			return nil, err
		}
		if ok {
			return func(ctx context.Context) error { return bareUnlock.Run(ctx, b.c, []string{key}, v).Err() }, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (b *bareClient) roundTrips() int64 { return b.n.Load() }
func (b *bareClient) close() error      { return b.c.Close() }

// ---- bsm/redislock ----

type redislockClient struct {
	c   *goredis.Client
	l   *redislock.Client
	n   *atomic.Int64
	ttl time.Duration
}

func openRedislock(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	n := new(atomic.Int64)
	cs, err := redisClients(ep.Redis, n)
	if err != nil {
		return nil, err
	}
	return &redislockClient{c: cs[0], l: redislock.New(cs[0]), n: n, ttl: ttlOr(ttl)}, nil
}

func (r *redislockClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := r.l.Obtain(ctx, "benchpeers:redislock:"+key, r.ttl, &redislock.Options{
		RetryStrategy: redislock.LinearBackoff(10 * time.Millisecond),
	})
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (r *redislockClient) roundTrips() int64 { return r.n.Load() }
func (r *redislockClient) close() error      { return r.c.Close() }

// ---- redsync ----

type redsyncClient struct {
	cs     []*goredis.Client
	rs     *redsync.Redsync
	n      *atomic.Int64
	ttl    time.Duration
	prefix string
}

func openRedsync(rawURL, prefix string, ttl time.Duration) (client, error) {
	n := new(atomic.Int64)
	cs, err := redisClients(rawURL, n)
	if err != nil {
		return nil, err
	}
	var pools []redsyncredis.Pool
	for _, c := range cs {
		pools = append(pools, redsyncgoredis.NewPool(c))
	}
	return &redsyncClient{cs: cs, rs: redsync.New(pools...), n: n, ttl: ttlOr(ttl), prefix: prefix}, nil
}

func openRedsyncSingle(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	return openRedsync(ep.Redis, "benchpeers:redsync:", ttl)
}

func openRedsyncRedlock(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	return openRedsync(ep.Redlock, "benchpeers:redsync-redlock:", ttl)
}

func (r *redsyncClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	// redsync's default retry delays; tries without limit, so that a
	// waiter waits as long as the others do.
	m := r.rs.NewMutex(r.prefix+key, redsync.WithExpiry(r.ttl), redsync.WithTries(math.MaxInt32))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock reported not held")
		}
		return err
	}, nil
}

func (r *redsyncClient) roundTrips() int64 { return r.n.Load() }
func (r *redsyncClient) close() error      { return closeAll(r.cs) }

// ---- dlock ----

type dlockClient struct {
	l   *dlock.Locker
	cs  []*goredis.Client // the clients given to the backend, closed after it
	n   *atomic.Int64     // nil: round trips not counted
	ttl time.Duration
	// rw, when above 0, makes lock take a read-write lock of that many
	// readers instead of a Mutex: as a reader when rwRead, else as the
	// writer.
	rw     int
	rwRead bool
}

func (d *dlockClient) opts() []dlock.Option {
	if d.ttl > 0 {
		return []dlock.Option{dlock.WithTTL(d.ttl)}
	}
	return nil
}

func (d *dlockClient) hold(ctx context.Context, key string) (*dlock.Mutex, error) {
	m, err := d.l.NewMutex("benchpeers/"+key, d.opts()...)
	if err != nil {
		return nil, err
	}
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func (d *dlockClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	if d.rw > 0 {
		rw, err := d.l.NewRWMutex("benchpeers/rw/"+key, d.rw, d.opts()...)
		if err != nil {
			return nil, err
		}
		if d.rwRead {
			if err := rw.RLock(ctx); err != nil {
				return nil, err
			}
			return rw.RUnlock, nil
		}
		if err := rw.Lock(ctx); err != nil {
			return nil, err
		}
		return rw.Unlock, nil
	}
	m, err := d.hold(ctx, key)
	if err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (d *dlockClient) roundTrips() int64 {
	if d.n == nil {
		return -1
	}
	return d.n.Load()
}

func (d *dlockClient) close() error {
	err := d.l.Close()
	return errors.Join(err, closeAll(d.cs))
}

func openDlockRedis(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	n := new(atomic.Int64)
	// The clients are the benchmark's, to count round trips, with the
	// options the URL opener gives its own.
	cs, err := redisClientsWith(ep.Redis, n, dlockRedisOptions)
	if err != nil {
		return nil, err
	}
	l, err := dlockredis.New(ctx, cs[0], dlockredis.Config{Prefix: "benchpeers:dlock:"})
	if err != nil {
		_ = closeAll(cs)
		return nil, err
	}
	return &dlockClient{l: l, cs: cs, n: n, ttl: ttl}, nil
}

func openDlockRedlock(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	n := new(atomic.Int64)
	cs, err := redisClientsWith(ep.Redlock, n, dlockRedlockOptions)
	if err != nil {
		return nil, err
	}
	l, err := redlock.New(cs, redlock.Config{Prefix: "benchpeers:dlock:"})
	if err != nil {
		_ = closeAll(cs)
		return nil, err
	}
	return &dlockClient{l: l, cs: cs, n: n, ttl: ttl}, nil
}

func openDlockURL(pick func(Endpoints) string) func(context.Context, Endpoints, time.Duration) (client, error) {
	return func(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
		u := pick(ep)
		if u == "" {
			return nil, errors.New("no endpoint")
		}
		l, err := dlock.Open(ctx, u)
		if err != nil {
			return nil, err
		}
		return &dlockClient{l: l, ttl: ttl}, nil
	}
}

// ---- etcd concurrency.Mutex ----

type etcdClient struct {
	cli *clientv3.Client
	s   *concurrency.Session
}

func openEtcdMutex(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	hs, err := hosts(ep.Etcd, "2379")
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: hs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttlOr(ttl)/time.Second)))
	if err != nil {
		cli.Close()
		return nil, err
	}
	return &etcdClient{cli: cli, s: s}, nil
}

func (e *etcdClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := concurrency.NewMutex(e.s, "/benchpeers/etcd/"+key)
	if err := m.Lock(ctx); err != nil {
		return nil, err
	}
	return m.Unlock, nil
}

func (e *etcdClient) roundTrips() int64 { return -1 }
func (e *etcdClient) close() error {
	return errors.Join(e.s.Close(), e.cli.Close())
}

// ---- go-zookeeper zk.Lock ----

type zkClient struct{ conn *zk.Conn }

func openZKLock(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	hs, err := hosts(ep.ZK, "2181")
	if err != nil {
		return nil, err
	}
	conn, ev, err := zk.Connect(hs, ttlOr(ttl), zk.WithLogInfo(false), zk.WithLogger(nopZK{}))
	if err != nil {
		return nil, err
	}
	// Wait for the session, so that the first Lock is not a connect.
	deadline := time.After(10 * time.Second)
	for conn.State() != zk.StateHasSession {
		select {
		case <-ev:
		case <-deadline:
			conn.Close()
			return nil, errors.New("zk: no session within 10s")
		}
	}
	return &zkClient{conn: conn}, nil
}

func (z *zkClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l := zk.NewLock(z.conn, "/benchpeers-zk/"+strings.ReplaceAll(key, "/", "_"), zk.WorldACL(zk.PermAll))
	if err := l.LockWithData(nil); err != nil { // zk.Lock takes no context
		return nil, err
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

func (z *zkClient) roundTrips() int64 { return -1 }
func (z *zkClient) close() error      { z.conn.Close(); return nil }

type nopZK struct{}

func (nopZK) Printf(string, ...any) {}

// ---- Consul api.Lock ----

type consulClient struct{ c *consulapi.Client }

func openConsulLock(ctx context.Context, ep Endpoints, ttl time.Duration) (client, error) {
	hs, err := hosts(ep.Consul, "8500")
	if err != nil {
		return nil, err
	}
	cfg := consulapi.DefaultConfig()
	cfg.Address = hs[0]
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &consulClient{c: c}, nil
}

func (c *consulClient) lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := c.c.LockOpts(&consulapi.LockOptions{Key: "benchpeers/consul/" + key})
	if err != nil {
		return nil, err
	}
	lost, err := l.Lock(ctx.Done())
	if err != nil {
		return nil, err
	}
	if lost == nil {
		return nil, fmt.Errorf("consul: lock not acquired: %w", context.Cause(ctx))
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

func (c *consulClient) roundTrips() int64 { return -1 }
func (c *consulClient) close() error      { return nil }
