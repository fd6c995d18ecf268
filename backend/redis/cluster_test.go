package redis

import (
	"context"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/redislua"
	"github.com/dlock-go/dlock/internal/testenv"
)

// On the Cluster, a key's lock, counter and channel share a slot, different
// keys spread over every master, and releases use sharded pub/sub.
func TestClusterSlots(t *testing.T) {
	raw := withParams(t, testenv.Endpoint(t, "DLOCK_REDIS_CLUSTER_URL"), "prefix", testPrefix)
	admin, ok := adminClient(t, raw).(*goredis.ClusterClient)
	if !ok {
		t.Fatal("the cluster endpoint did not give a ClusterClient")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var masters atomic.Int32 // ForEachMaster calls fn concurrently
	if err := admin.ForEachMaster(ctx, func(context.Context, *goredis.Client) error {
		masters.Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for i := 0; i < 64; i++ {
		n := keyNames(testPrefix, fmt.Sprintf("spread/%d", i))
		var slots []int64
		for _, name := range []string{n.lock, n.fence, n.channel} {
			s, err := admin.ClusterKeySlot(ctx, name).Result()
			if err != nil {
				t.Fatal(err)
			}
			slots = append(slots, s)
		}
		if slots[0] != slots[1] || slots[0] != slots[2] {
			t.Fatalf("key %d: slots %v; want one slot for lock, counter and channel", i, slots)
		}
		node, err := admin.MasterForKey(ctx, n.lock)
		if err != nil {
			t.Fatal(err)
		}
		used[node.Options().Addr] = true
	}
	if len(used) < 3 || len(used) != int(masters.Load()) {
		t.Fatalf("64 keys landed on %d of %d masters", len(used), masters.Load())
	}
	u, _ := url.Parse(raw)
	d, err := openDriver(ctx, u, newClient)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.publish != redislua.ShardedPublish {
		t.Fatalf("releases announced with %q on a Redis 7 Cluster; want SPUBLISH", d.publish)
	}
}
