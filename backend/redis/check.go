package redis

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

// serverInfo is what the backend learns about the server(s) at open.
type serverInfo struct {
	policies      map[string]string // master address -> maxmemory_policy ("" if not reported)
	shardedPubSub bool              // every master is Redis 7 or later
}

// inspect reads INFO from the server, or from every master of a Cluster.
// It is also the reachability check: a server that does not answer before
// ctx ends is reported as unavailable.
func inspect(ctx context.Context, client goredis.UniversalClient) (serverInfo, error) {
	info := serverInfo{policies: map[string]string{}, shardedPubSub: true}
	var mu sync.Mutex
	read := func(ctx context.Context, c *goredis.Client) error {
		s, err := c.Info(ctx).Result()
		if err != nil {
			return err
		}
		fields := parseInfo(s)
		addr := c.Options().Addr
		if _, _, err := net.SplitHostPort(addr); err != nil && fields["tcp_port"] != "" {
			addr = "the primary on port " + fields["tcp_port"] // a Sentinel-backed client
		}
		mu.Lock()
		defer mu.Unlock()
		info.policies[addr] = fields["maxmemory_policy"]
		if major(fields["redis_version"]) < 7 {
			info.shardedPubSub = false
		}
		return nil
	}
	var err error
	switch c := client.(type) {
	case *goredis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *goredis.Client:
		err = read(ctx, c)
	}
	if err != nil {
		if !serverError(err) {
			// No answer, or none before ctx ended: unreachable. The
			// context's error stays in the chain.
			err = driver.Unavailable(err)
		}
		return info, fmt.Errorf("redis: reading server INFO: %w", mapErr(err))
	}
	return info, nil
}

// checkEviction refuses masters whose maxmemory-policy may evict keys,
// unless allowed. Only noeviction is safe: volatile-* policies evict keys
// with an expiry, which every lock key has.
func (i serverInfo) checkEviction(allow bool) error {
	if allow {
		return nil
	}
	var bad []string
	for addr, p := range i.policies {
		if p != "noeviction" {
			if p == "" {
				p = "unknown (INFO has no maxmemory_policy)"
			}
			bad = append(bad, addr+": "+p)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%w: %s; set maxmemory-policy noeviction, or allow_eviction=true (Config.AllowEviction) to accept the risk",
		ErrEvictionPolicy, strings.Join(bad, ", "))
}

// parseInfo reads the "name:value" lines of an INFO reply.
func parseInfo(s string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// major returns the major version of "7.0.15", 0 if unknown.
func major(version string) int {
	s, _, _ := strings.Cut(version, ".")
	n, _ := strconv.Atoi(s)
	return n
}

// policyRecheck is how long an acquire trusts the last eviction-policy
// check when no new connection was made meanwhile: a CONFIG SET on a server
// already connected to is noticed within this time.
const policyRecheck = time.Minute

// policyWatch decides when the eviction policy is read again after open.
// Reading it is one INFO per master, so it is done only when the set of
// servers may have changed (a connection was dialled to a server not seen
// before: a Sentinel failover to the replica, a Cluster replica promoted, a
// new Cluster node), when a renewal or release found the lock key gone on a
// server that may evict, and at most once every policyRecheck otherwise.
// Never on every acquire.
type policyWatch struct {
	stale atomic.Bool   // a new server or a lost key since the last check
	every time.Duration // policyRecheck; shorter in tests

	mu   sync.Mutex // one check at a time; guards last
	last time.Time

	seenMu sync.Mutex
	seen   map[string]bool // server addresses dialled or checked
}

func newPolicyWatch(checked serverInfo) *policyWatch {
	w := &policyWatch{every: policyRecheck, last: time.Now(), seen: map[string]bool{}}
	w.saw(checked)
	return w
}

// saw records the servers a check looked at.
func (w *policyWatch) saw(info serverInfo) {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	for addr := range info.policies {
		w.seen[addr] = true
	}
}

// dialled records a new connection to addr and marks the policy stale if
// that server was never seen before.
func (w *policyWatch) dialled(addr string) {
	w.seenMu.Lock()
	defer w.seenMu.Unlock()
	if !w.seen[addr] {
		w.seen[addr] = true
		w.stale.Store(true)
	}
}

// due reports whether the next acquire should check the policy again.
func (w *policyWatch) due(now time.Time) bool {
	if w.stale.Load() {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return now.Sub(w.last) >= w.every
}

// dialHook tells the watch of every connection the client dials: the
// server at the other end may be a new master. The address is the
// connection's remote end (a Sentinel-backed client dials "FailoverClient"
// and finds the master itself).
type dialHook struct{ w *policyWatch }

func (h dialHook) DialHook(next goredis.DialHook) goredis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			if ra := conn.RemoteAddr(); ra != nil {
				addr = ra.String()
			}
			h.w.dialled(addr)
		}
		return conn, err
	}
}

func (dialHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return next
}

// watchDials installs the dial hook on client: on a Cluster on every node
// client known now and on every one created later (a new node is itself a
// change of topology).
func (w *policyWatch) watchDials(ctx context.Context, client goredis.UniversalClient) {
	hook := dialHook{w}
	switch c := client.(type) {
	case *goredis.ClusterClient:
		c.OnNewNode(func(n *goredis.Client) {
			w.stale.Store(true)
			n.AddHook(hook)
		})
		_ = c.ForEachShard(ctx, func(_ context.Context, n *goredis.Client) error {
			n.AddHook(hook)
			return nil
		})
	case *goredis.Client:
		c.AddHook(hook)
	}
}

// recheck reads the eviction policy of every master again when it is due,
// and reports a master that may evict (ErrEvictionPolicy) unless eviction is
// allowed. A check that cannot reach the servers is left for the next
// acquire.
func (d *redisDriver) recheck(ctx context.Context) error {
	w := d.policy
	if d.cfg.AllowEviction || !w.due(time.Now()) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stale.Load() && time.Since(w.last) < w.every {
		return nil // another acquire just checked
	}
	info, err := inspect(ctx, d.client)
	if err != nil {
		return nil
	}
	w.last = time.Now()
	w.saw(info)
	if err := info.checkEviction(false); err != nil {
		w.stale.Store(true) // look again next time: the operator may fix it
		return err
	}
	w.stale.Store(false)
	return nil
}

// notHeld is the error of a renewal or release that found the lock key
// gone or another owner's. When the server holding the key may evict keys,
// the error says that eviction is the likely cause and also matches
// ErrEvictionPolicy, and the next acquire checks every master again.
func (d *redisDriver) notHeld(ctx context.Context, st *state) error {
	base := fmt.Errorf("redis: lock expired or taken over: %w", driver.ErrNotHeld)
	var node *goredis.Client
	switch c := d.client.(type) {
	case *goredis.ClusterClient:
		n, err := c.MasterForKey(ctx, st.calls.Lock())
		if err != nil {
			return base
		}
		node = n
	case *goredis.Client:
		node = c
	}
	s, err := node.Info(ctx).Result()
	if err != nil {
		return base
	}
	fields := parseInfo(s)
	policy := fields["maxmemory_policy"]
	if policy == "noeviction" {
		return base
	}
	d.policy.stale.Store(true)
	if policy == "" {
		policy = "unknown"
	}
	return fmt.Errorf("redis: lock key %s is gone or another owner's, on a server whose maxmemory-policy is %s (evicted_keys %s): eviction is the likely cause: %w (%w)",
		st.calls.Lock(), policy, fields["evicted_keys"], driver.ErrNotHeld, ErrEvictionPolicy)
}
