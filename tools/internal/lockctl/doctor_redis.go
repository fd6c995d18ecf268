package lockctl

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/backend/redlock"
	"github.com/dlock-go/dlock/driver"
)

// redisOwnParams are the URL parameters of the redis and redlock backends
// and the portable ones: what is left goes to go-redis, as the backends do.
var redisOwnParams = []string{"prefix", "wait_replicas", "wait_timeout", "allow_eviction", "timeout", "drift", "db", "ttl", "autorenew"}

// redisClientURL is u for go-redis: one host in the URL, the others as
// addr=, this backend's parameters removed (backend/redis newClient).
func redisClientURL(u *url.URL, hosts []string, base string) string {
	q := u.Query()
	for _, p := range redisOwnParams {
		q.Del(p)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	gu := url.URL{Scheme: base, User: u.User, Host: hosts[0], Path: u.Path, RawQuery: q.Encode()}
	return gu.String()
}

func (d *doctor) redis(ctx context.Context) error {
	scheme := strings.ToLower(d.u.Scheme)
	base, kind, _ := strings.Cut(scheme, "+")
	port := "6379"
	if kind == "sentinel" {
		port = "26379"
	}
	hosts, err := d.hosts(port)
	if err != nil {
		return err
	}
	waitReplicas, _ := strconv.Atoi(d.u.Query().Get("wait_replicas"))
	cu := *d.u
	if kind == "cluster" {
		cu.Path = "" // a Cluster has no database
	}
	gu := redisClientURL(&cu, hosts, base)
	var masters []*goredis.Client
	switch kind {
	case "cluster":
		o, err := goredis.ParseClusterURL(gu)
		if err != nil {
			return fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
		}
		cc := goredis.NewClusterClient(o)
		defer cc.Close()
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *goredis.Client) error {
			masters = append(masters, goredis.NewClient(c.Options()))
			return nil
		})
		if err != nil {
			return err
		}
		d.info("redis.cluster", fmt.Sprintf("Redis Cluster with %d masters", len(masters)))
	case "sentinel":
		o, err := goredis.ParseFailoverURL(gu)
		if err != nil {
			return fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
		}
		masters = append(masters, goredis.NewFailoverClient(o))
	default:
		o, err := goredis.ParseURL(gu)
		if err != nil {
			return fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
		}
		masters = append(masters, goredis.NewClient(o))
	}
	defer func() {
		for _, c := range masters {
			_ = c.Close()
		}
	}()
	for _, c := range masters {
		if err := d.redisNode(ctx, c, c.Options().Addr, kind == "cluster", waitReplicas); err != nil {
			return err
		}
	}
	return nil
}

// redisConfig reads one CONFIG GET parameter ("" and an error if it cannot:
// CONFIG may be renamed or denied by ACL).
func redisConfig(ctx context.Context, c *goredis.Client, name string) (string, error) {
	m, err := c.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", err
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter", name)
	}
	return v, nil
}

// redisInfo reads an INFO section as fields.
func redisInfo(ctx context.Context, c *goredis.Client, section string) (map[string]string, error) {
	s, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	f := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			f[k] = v
		}
	}
	return f, nil
}

// redisTiming measures the round trip (the smallest of a few) and the clock
// skew by TIME.
func (d *doctor) redisTiming(ctx context.Context, c *goredis.Client, addr string) (time.Duration, error) {
	best := time.Duration(-1)
	var st, b, a time.Time
	for range 5 {
		before := time.Now()
		t, err := c.Time(ctx).Result()
		after := time.Now()
		if err != nil {
			return 0, err
		}
		if rtt := after.Sub(before); best < 0 || rtt < best {
			best, st, b, a = rtt, t, before, after
		}
	}
	d.clockSkew("clock.skew", st, b, a, time.Microsecond)
	d.findings[len(d.findings)-1].Summary = addr + ": " + d.findings[len(d.findings)-1].Summary
	return best, nil
}

// redisNode checks one master.
func (d *doctor) redisNode(ctx context.Context, c *goredis.Client, addr string, cluster bool, waitReplicas int) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return err
	}
	srv, err := redisInfo(ctx, c, "server")
	if err != nil {
		return err
	}
	d.info("redis.version", fmt.Sprintf("%s: Redis %s", addr, srv["redis_version"]))
	rtt, err := d.redisTiming(ctx, c, addr)
	if err != nil {
		return err
	}
	d.roundTrip("rtt", rtt)
	d.findings[len(d.findings)-1].Summary = addr + ": " + d.findings[len(d.findings)-1].Summary

	d.redisSettings(ctx, c, addr)

	repl, err := redisInfo(ctx, c, "replication")
	if err != nil {
		d.unknown("redis.replication", err)
		return nil
	}
	replicas, _ := strconv.Atoi(repl["connected_slaves"])
	switch {
	case replicas == 0 && cluster:
		d.add("redis.cluster-no-replica", LevelWarning, addr+": Cluster master without a replica",
			"when this node fails its slots have no failover: locks on them can be neither acquired nor renewed, so their holders lose them, until the node is back (and, without persistence, back empty)",
			"give every master a replica (cluster-replicas 1), with wait_replicas=1 in the URL")
	case replicas == 0:
		d.ok("redis.replicas", addr+": no replicas (a failover cannot lose a lock)")
	case waitReplicas == 0:
		d.add("redis.wait-replicas", LevelWarning, fmt.Sprintf("%s: %d replica(s), and the URL has no wait_replicas", addr, replicas),
			"replication is asynchronous: a failover to a replica that had not yet received an acquire loses that lock, and a second client takes it while the first still holds it",
			fmt.Sprintf("add wait_replicas=%d to the URL (dlock then WAITs for the replicas before reporting a hold)", replicas))
	default:
		d.ok("redis.wait-replicas", fmt.Sprintf("%s: %d replica(s), wait_replicas=%d", addr, replicas, waitReplicas))
	}
	if replicas > 0 {
		v, err := redisConfig(ctx, c, "min-replicas-to-write")
		switch {
		case err != nil:
			d.unknown("redis.min-replicas-to-write", err)
		case v == "0":
			d.add("redis.min-replicas-to-write", LevelWarning, addr+": min-replicas-to-write 0",
				"a master cut off from its replicas keeps accepting acquires that the failover side never sees: two holders across a partition",
				"CONFIG SET min-replicas-to-write 1 (and min-replicas-max-lag 10), and persist it in redis.conf")
		default:
			d.ok("redis.min-replicas-to-write", addr+": min-replicas-to-write "+v)
		}
	}
	return nil
}

// redisSettings checks eviction and persistence on one node.
func (d *doctor) redisSettings(ctx context.Context, c *goredis.Client, addr string) {
	policy, err := redisConfig(ctx, c, "maxmemory-policy")
	if err != nil {
		mem, ierr := redisInfo(ctx, c, "memory")
		if ierr == nil && mem["maxmemory_policy"] != "" {
			policy, err = mem["maxmemory_policy"], nil
		}
	}
	switch {
	case err != nil:
		d.unknown("redis.maxmemory-policy", err)
	case policy == "noeviction":
		d.ok("redis.maxmemory-policy", addr+": maxmemory-policy noeviction")
	default:
		d.add("redis.maxmemory-policy", LevelBroken, addr+": maxmemory-policy "+policy,
			"under memory pressure Redis evicts keys, lock keys included (they carry a TTL, so volatile-* policies pick them too): an evicted lock lets a second holder in while the first still holds it, which breaks exclusion",
			"CONFIG SET maxmemory-policy noeviction (and in redis.conf), or use a Redis of its own for locks")
	}

	aof, aerr := redisConfig(ctx, c, "appendonly")
	fsync, ferr := redisConfig(ctx, c, "appendfsync")
	switch {
	case aerr != nil:
		d.unknown("redis.persistence", aerr)
	case aof != "yes":
		d.add("redis.persistence", LevelWarning, addr+": appendonly no (locks and token counters are not persisted)",
			"a restart comes back without the locks: a client may take a key another still holds, breaking exclusion if the server is back within a TTL. Fencing tokens still increase: they are floored at the server's TIME in microseconds, so their order holds as long as the server clock moves forward",
			"restart a crashed Redis no sooner than one TTL later (the Redlock delayed restart), or appendonly yes with appendfsync always")
	case ferr != nil:
		d.unknown("redis.appendfsync", ferr)
	case fsync == "always":
		d.ok("redis.appendfsync", addr+": appendonly yes, appendfsync always")
	default:
		d.add("redis.appendfsync", LevelWarning, addr+": appendonly yes, appendfsync "+fsync,
			"a crash of the machine loses the last second (everysec) or more (no) of writes: acquires and token counters roll back. Tokens still increase, floored at the server's TIME in microseconds, while its clock moves forward; exclusion may break, if the server is back within a TTL with a lock forgotten. A warning, not broken: only a crash followed by a fast restart breaks it, and the fix below avoids that",
			"appendfsync always, or restart a crashed Redis no sooner than one TTL later")
	}
}

func (d *doctor) redlock(ctx context.Context) error {
	hosts, err := d.hosts("6379")
	if err != nil {
		return err
	}
	timeout := redlock.DefaultTimeout
	if v := d.u.Query().Get("timeout"); v != "" {
		if timeout, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("%w: timeout=%s", driver.ErrInvalidURL, v)
		}
	}
	n := len(hosts)
	switch {
	case n < 3 || n%2 == 0:
		d.add("redlock.instances", LevelBroken, fmt.Sprintf("%d instances", n),
			"Redlock needs a majority of an odd number, at least 3, of independent masters",
			"use 3 or 5 independent Redis masters")
	default:
		d.ok("redlock.instances", fmt.Sprintf("%d instances: a hold needs %d", n, n/2+1))
	}
	byHost := map[string][]string{}
	for _, h := range hosts {
		host, _, _ := net.SplitHostPort(h)
		ips, err := net.DefaultResolver.LookupHost(ctx, host)
		key := host
		if err == nil && len(ips) > 0 {
			key = ips[0]
		}
		byHost[key] = append(byHost[key], h)
	}
	for ip, hs := range byHost {
		if len(hs) > 1 {
			d.add("redlock.same-host", LevelWarning, fmt.Sprintf("%d instances on one host %s (%s)", len(hs), ip, strings.Join(hs, ", ")),
				"one machine's crash or restart takes several instances at once: the majority is not made of independent failures, and a restart without persistence forgets several instances' locks together",
				"put each instance on a machine of its own")
		}
	}
	if len(byHost) == n {
		d.ok("redlock.same-host", "every instance on a host of its own")
	}
	q := d.u.Query()
	for _, p := range redisOwnParams {
		q.Del(p)
	}
	for _, h := range hosts {
		gu := url.URL{Scheme: "redis", User: d.u.User, Host: h, RawQuery: q.Encode()}
		if db := d.u.Query().Get("db"); db != "" {
			gu.Path = "/" + db
		}
		o, err := goredis.ParseURL(gu.String())
		if err != nil {
			return fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
		}
		c := goredis.NewClient(o)
		err = d.redlockInstance(ctx, c, h, timeout)
		_ = c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (d *doctor) redlockInstance(ctx context.Context, c *goredis.Client, addr string, timeout time.Duration) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	rtt, err := d.redisTiming(ctx, c, addr)
	if err != nil {
		return err
	}
	summary := fmt.Sprintf("%s: round trip %v against the per-instance timeout %v", addr, roundDuration(rtt), timeout)
	switch {
	case rtt >= timeout:
		d.add("redlock.timeout", LevelBroken, summary,
			"every request to this instance times out: it never counts towards the majority",
			"raise timeout= in the URL above the round trip (a few times it), or move the instance closer")
	case rtt > timeout/3:
		d.add("redlock.timeout", LevelWarning, summary,
			"a little jitter makes requests to this instance time out: it then does not count towards the majority, and acquires fail more often",
			"raise timeout= in the URL to a few round trips")
	default:
		d.ok("redlock.timeout", summary)
	}
	d.roundTrip("rtt", rtt)
	d.findings[len(d.findings)-1].Summary = addr + ": " + d.findings[len(d.findings)-1].Summary
	d.redisSettings(ctx, c, addr)
	return nil
}
