package redis

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

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
		mu.Lock()
		defer mu.Unlock()
		info.policies[c.Options().Addr] = fields["maxmemory_policy"]
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
