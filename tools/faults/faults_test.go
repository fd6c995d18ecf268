//go:build faults

package faults

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	_ "github.com/dlock-go/dlock/backend/consul"
	_ "github.com/dlock-go/dlock/backend/etcd"
	_ "github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/postgres"
	_ "github.com/dlock-go/dlock/backend/redis"
	_ "github.com/dlock-go/dlock/backend/redis/rediscluster"
	_ "github.com/dlock-go/dlock/backend/redis/redissentinel"
	_ "github.com/dlock-go/dlock/backend/redlock"
	_ "github.com/dlock-go/dlock/backend/zookeeper"
	"github.com/dlock-go/dlock/internal/testenv"
)

func redisB(t *testing.T) Backend {
	return Backend{Name: "redis", URL: testenv.Endpoint(t, "DLOCK_REDIS_URL"), TTL: time.Second, Liveness: 2 * time.Second}
}

func redlockB(t *testing.T) Backend {
	return Backend{Name: "redlock", URL: testenv.Endpoint(t, "DLOCK_REDLOCK_URL"), TTL: time.Second, Liveness: 2 * time.Second}
}

// redlockSlowB is Redlock for the slow-links scenario (round trips of about
// 200ms): its per-instance timeout (100ms by default, at most a tenth of the
// lease) must be longer than a round trip, or no instance ever answers in
// time and no lock is granted. A 5s lease allows 500ms.
func redlockSlowB(t *testing.T) Backend {
	b := redlockB(t)
	b.URL += "?timeout=500ms"
	b.TTL = 5 * time.Second
	return b
}

func etcdB(t *testing.T) Backend {
	return Backend{Name: "etcd", URL: testenv.Endpoint(t, "DLOCK_ETCD_URL"), TTL: 2 * time.Second, Liveness: 3 * time.Second}
}

func etcd3B(t *testing.T) Backend {
	return Backend{Name: "etcd3", URL: testenv.Endpoint(t, "DLOCK_ETCD3_URL"), TTL: 2 * time.Second, Liveness: 8 * time.Second}
}

func zkB(t *testing.T) Backend {
	return Backend{Name: "zookeeper", URL: testenv.Endpoint(t, "DLOCK_ZK_URL") + "?session_timeout=2s", TTL: 2 * time.Second, Liveness: 3 * time.Second}
}

func zk3B(t *testing.T) Backend {
	return Backend{Name: "zookeeper3", URL: testenv.Endpoint(t, "DLOCK_ZK3_URL") + "?session_timeout=2s", TTL: 2 * time.Second, Liveness: 8 * time.Second}
}

func consulB(t *testing.T) Backend {
	// A short lock-delay keeps the run short; scenario 10 tests a long one.
	return Backend{Name: "consul", URL: testenv.Endpoint(t, "DLOCK_CONSUL_URL") + "?lockdelay=1s", TTL: 10 * time.Second, Grace: 10 * time.Second, Liveness: 6 * time.Second}
}

// fileB is the file backend on a directory of the cell's own.
func fileB(t *testing.T) Backend {
	return Backend{Name: "file", URL: "file://" + t.TempDir(), TTL: time.Second, Liveness: 2 * time.Second}
}

// postgresB keeps its leases in a table of the suite's own (the keys of
// every run are distinct).
func postgresB(t *testing.T) Backend {
	return Backend{Name: "postgres", URL: testenv.Endpoint(t, "DLOCK_POSTGRES_URL") + "&table=dlock_faults", TTL: time.Second, Liveness: 2 * time.Second}
}

// faultBackends are the backends the matrix's cells run on, by topology
// name (the file backend, which has no topology, by its scheme). It is one
// of the tables that list the backends (docs/adding-a-backend.md): a test
// in tools/internal/backendtables fails when a topology is neither here nor
// in failoverOnly.
var faultBackends = map[string]func(*testing.T) Backend{
	"redis": redisB, "redlock": redlockB, "etcd": etcdB, "etcd3": etcd3B,
	"zookeeper": zkB, "zookeeper3": zk3B, "consul": consulB, "file": fileB,
	"postgres": postgresB,
}

// failoverOnly are the topologies the matrix runs only as private copies
// of their own, in the failover cells (scenarios 12 and 13).
var failoverOnly = []string{"redis-sentinel", "redis-cluster"}

// A topology is either a backend of the matrix or run only in the failover
// cells, never both: the matrix would disturb the failover cells' servers.
func TestFailoverOnlyApart(t *testing.T) {
	for _, name := range failoverOnly {
		if _, ok := faultBackends[name]; ok {
			t.Errorf("%s is both a matrix backend and a failover-only topology", name)
		}
	}
}

// TestFaults runs the matrix: scenario × backend.
//
// The cells run in four lanes side by side, each lane one cell at a
// time, because many cells kill, pause or cut off servers: a lane's cells
// touch only servers that no other lane's cells disturb. Consul's cells
// pause, kill and cut off its clients, never the agent, and no other
// cell uses the agent; the failover cells start private topologies of
// their own. Consul's leases (10 s at least) and the failovers' timeouts
// make these two lanes most of the matrix's waiting. The fourth lane has
// scenario 18 on the stores no cell stops (file, etcd, zookeeper: their
// cells cut off only clients); the main lane has every other cell.
func TestFaults(t *testing.T) {
	var lanes sync.WaitGroup
	lane := func(cells func()) {
		lanes.Add(1)
		go func() {
			defer lanes.Done()
			cells()
		}()
	}
	defer lanes.Wait()
	lane(func() {
		backendCells(t, "consul", consulB)
		electionCells(t, "consul", consulB)
		t.Run("10-consul-session-invalidated", func(t *testing.T) { consulInvalidated(t, consulB(t)) })
		t.Run("18-many-holds-cut-off/consul", func(t *testing.T) { manyHoldsCutOff(t, consulB(t)) })
	})
	lane(func() {
		t.Run("12-sentinel-failover", sentinelFailover)
		t.Run("13-cluster-failover", clusterFailover)
	})
	// Scenario 18 where no other cell disturbs the store: its cells
	// only cut their own client off, and hold a thousand leases.
	lane(func() {
		t.Run("18-many-holds-cut-off/file", func(t *testing.T) { manyHoldsCutOff(t, fileB(t)) })
		t.Run("18-many-holds-cut-off/etcd", func(t *testing.T) { manyHoldsCutOff(t, etcdB(t)) })
		t.Run("18-many-holds-cut-off/zookeeper", func(t *testing.T) { manyHoldsCutOff(t, zkB(t)) })
	})

	common := faultBackends
	order := []string{"redis", "redlock", "etcd", "zookeeper", "postgres"}
	for _, name := range order {
		backendCells(t, name, common[name])
	}
	// Leader election (dlock.Election): the same worker loop as candidates.
	for _, name := range order {
		electionCells(t, name, common[name])
	}
	t.Run("14-leader-paused-past-lease/etcd3", func(t *testing.T) { leaderPausedPastLease(t, etcd3B(t)) })
	t.Run("15-leader-killed/etcd3", func(t *testing.T) { leaderKilled(t, etcd3B(t)) })
	t.Run("14-leader-paused-past-lease/zookeeper3", func(t *testing.T) { leaderPausedPastLease(t, zk3B(t)) })
	t.Run("15-leader-killed/zookeeper3", func(t *testing.T) { leaderKilled(t, zk3B(t)) })
	t.Run("6-redis-restart", func(t *testing.T) { redisRestart(t, redisB(t)) })
	t.Run("6c-restart/postgres", func(t *testing.T) { postgresRestart(t, postgresB(t)) })
	t.Run("6b-redis-snapshot-rollback", func(t *testing.T) {
		snapshotRollback(t, redisB(t), "6b Redis restarted from an older snapshot during a hold", []string{"redis"}, 3)
	})
	t.Run("7a-redlock-minority-down", func(t *testing.T) { redlockMinorityDown(t, redlockB(t)) })
	t.Run("7b-redlock-majority-down", func(t *testing.T) { redlockMajorityDown(t, redlockB(t)) })
	t.Run("7c-redlock-restart-empty", func(t *testing.T) { redlockRestartEmpty(t, redlockB(t)) })
	t.Run("17-waiters-paused-at-handover/redis", func(t *testing.T) { waitersPausedAtHandover(t, redisB(t)) })
	t.Run("17-waiters-paused-at-handover/redlock", func(t *testing.T) { waitersPausedAtHandover(t, redlockB(t)) })
	t.Run("7d-redlock-snapshot-rollback", func(t *testing.T) {
		snapshotRollback(t, redlockB(t), "7d Redlock: every master restarted from an older snapshot during a hold",
			[]string{"redlock-1", "redlock-2", "redlock-3", "redlock-4", "redlock-5"}, 15)
	})
	t.Run("16-semaphore-paused/etcd3", func(t *testing.T) { semaphorePaused(t, etcd3B(t)) })
	t.Run("8-leader/etcd3", func(t *testing.T) { leaderFaults(t, etcd3B(t)) })
	t.Run("8-leader/zookeeper3", func(t *testing.T) { leaderFaults(t, zk3B(t)) })
	t.Run("8-leader-isolated/etcd3", func(t *testing.T) { leaderIsolated(t, etcd3B(t)) })
	t.Run("8-leader-isolated/zookeeper3", func(t *testing.T) { leaderIsolated(t, zk3B(t)) })
	t.Run("9-zk-session-expiry", func(t *testing.T) {
		b := zkB(t)
		clientPartition(t, b, "9 ZooKeeper session expired (partition past the session timeout)", 3*b.TTL)
	})
	t.Run("11-zk-follower-isolated/zookeeper3", func(t *testing.T) { followerIsolated(t, zk3B(t)) })
	for _, name := range []string{"redis", "redlock", "postgres"} {
		t.Run("18-many-holds-cut-off/"+name, func(t *testing.T) { manyHoldsCutOff(t, common[name](t)) })
	}
	t.Run("18-many-holds-cut-off/etcd3", func(t *testing.T) { manyHoldsCutOff(t, etcd3B(t)) })
	t.Run("18-many-holds-cut-off/zookeeper3", func(t *testing.T) { manyHoldsCutOff(t, zk3B(t)) })
}

// backendCells runs the cells every backend has, on one backend.
func backendCells(t *testing.T, name string, mk func(*testing.T) Backend) {
	t.Run("1-baseline/"+name, func(t *testing.T) { baseline(t, mk(t)) })
	t.Run("2-pause-past-lease/"+name, func(t *testing.T) { pausePastLease(t, mk(t)) })
	t.Run("3-short-pause/"+name, func(t *testing.T) { shortPause(t, mk(t)) })
	t.Run("4-holder-killed/"+name, func(t *testing.T) { holderKilled(t, mk(t)) })
	t.Run("5-client-partition/"+name, func(t *testing.T) {
		b := mk(t)
		clientPartition(t, b, "5 client partitioned past its lease", 2*(b.TTL+b.Grace))
	})
	t.Run("5b-slow-links/"+name, func(t *testing.T) {
		b := mk(t)
		if name == "redlock" {
			b = redlockSlowB(t)
		}
		slowLinks(t, b)
	})
	t.Run("16-semaphore-paused/"+name, func(t *testing.T) { semaphorePaused(t, mk(t)) })
	t.Run("19-rw-writer-paused/"+name, func(t *testing.T) { rwWriterPaused(t, mk(t)) })
	t.Run("20-rw-reader-killed/"+name, func(t *testing.T) { rwReaderKilled(t, mk(t)) })
}

// electionCells runs the leader election cells (dlock.Election: the same
// worker loop, as candidates) on one backend.
func electionCells(t *testing.T, name string, mk func(*testing.T) Backend) {
	t.Run("14-leader-paused-past-lease/"+name, func(t *testing.T) { leaderPausedPastLease(t, mk(t)) })
	t.Run("15-leader-killed/"+name, func(t *testing.T) { leaderKilled(t, mk(t)) })
}

// Scenario 10: the holder's Consul session is destroyed from outside. The
// holder must learn of it, and nobody may acquire before the lock-delay
// has passed: that delay is what keeps a holder that has not noticed yet
// from overlapping the next one.
func consulInvalidated(t *testing.T, b Backend) {
	const lockDelay = 5 * time.Second
	var id [4]byte
	_, _ = rand.Read(id[:])
	prefix := "dlockfaults" + hex.EncodeToString(id[:])
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + prefix
	u.RawQuery = "lockdelay=" + lockDelay.String()
	b.URL = u.String()
	cfg := api.DefaultConfig()
	cfg.Address = u.Host
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}

	r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Hold: victimHold(3 * time.Second)})
	victim := r.WaitFor(time.Minute, "the victim's read", isRead(0))
	pairs, _, err := client.KV().List(prefix+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	destroyed := 0
	for _, p := range pairs {
		// Waiters' tickets (the Consul backend's line, under .q/) are
		// locked by their own Lockers' sessions: only the lock's holder
		// is the victim.
		if p.Session != "" && !strings.HasPrefix(p.Key, prefix+"/.q/") {
			if _, err := client.Session().Destroy(p.Session, nil); err != nil {
				t.Fatal(err)
			}
			destroyed++
		}
	}
	if destroyed != 1 {
		t.Fatalf("found %d held keys under %s; want the victim's one", destroyed, prefix)
	}
	at := Mono()
	r.Healed()
	next := r.WaitFor(b.TTL+lockDelay+time.Minute, "the next holder", func(e Event) bool { return e.Kind == EvAcquire && e.Mono > at })
	r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
	h := r.Stop()
	judge(t, "10 Consul session invalidated during a hold", b, h, expect{must: allChecks})
	if d := time.Duration(next.Mono - at); d < lockDelay-100*time.Millisecond {
		t.Errorf("next holder acquired %v after the session was destroyed; lock-delay is %v", d, lockDelay)
	}
	if !lostReported(h, victim) {
		t.Errorf("the holder never reported the loss of its session")
	}
}
