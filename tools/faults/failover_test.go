package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	redisbk "github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/topology"
)

// Faults that hand a Redis lock to a server that has forgotten some of
// what it did: a replica promoted after it missed the last writes, a server
// restarted from a snapshot older than its last acquisitions. Fencing
// tokens must still never repeat or go back.

// private starts a private copy of the named topology on free ports, with
// a launcher of its own, and stops it when t ends.
func private(t *testing.T, base string) (*launcher.Launcher, topology.Topology) {
	t.Helper()
	bt, ok := topology.Lookup(topology.All(), base)
	if !ok {
		t.Fatalf("no topology %s", base)
	}
	tp, err := launcher.Private(bt, fmt.Sprintf("%s%d", strings.ReplaceAll(base, "-", ""), rand.IntN(1_000_000)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := launcher.New(t.TempDir(), []topology.Topology{tp})
	if err != nil {
		t.Fatal(err)
	}
	l.ReadyTimeout = 2 * time.Minute
	t.Cleanup(func() {
		if err := l.Down(context.Background()); err != nil {
			t.Errorf("stopping %s: %v", tp.Name, err)
		}
	})
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := l.Up(c, []string{tp.Name}); err != nil {
		t.Fatalf("starting %s: %v", tp.Name, err)
	}
	return l, tp
}

// redisAdmin is a plain client of one server, closed when t ends.
func redisAdmin(t *testing.T, addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// acquiredAfter matches an acquisition by worker (any worker if < 0) after
// the instant mark.
func acquiredAfter(worker int, mark int64) func(Event) bool {
	return func(e Event) bool {
		return e.Kind == EvAcquire && e.Mono > mark && (worker < 0 || e.Worker == worker)
	}
}

// acquisitionsAfter matches the n-th acquisition after mark.
func acquisitionsAfter(n int, mark int64) func(Event) bool {
	seen := 0
	return func(e Event) bool {
		if e.Kind == EvAcquire && e.Mono > mark {
			seen++
		}
		return seen >= n
	}
}

// Sentinel settings of the failover scenario: the victim's hold (renewed
// meanwhile) spans the failover, which takes a few seconds (a primary is
// down after one; the election and the promotion take one or two more),
// and the other workers' waits, at most a lease, end inside it.
const (
	sentinelTTL  = 3 * time.Second
	sentinelHold = 6 * time.Second
)

func sentinelB(url string) Backend {
	return Backend{Name: "redis-sentinel", URL: url, TTL: sentinelTTL, Liveness: 10 * time.Second}
}

// Scenario 11: Redis Sentinel fails the primary over to a replica that
// missed the last writes. The replica stops replicating (the primary
// refuses it PSYNC and its link is dropped), locks are granted on the
// primary meanwhile, then the primary is killed and the Sentinels promote
// the replica, which knows neither those locks nor their tokens.
//
// Without wait_replicas a lock granted in that window is lost in the
// failover, so two holders can overlap: the unfenced run is a canary; the
// fenced run must keep the data right and the tokens increasing, which
// needs tokens floored at the new primary's clock (the replica's counter
// is older than tokens already issued). With wait_replicas=1 no lock is
// granted in the window (no replica acknowledges it) and a renewal that
// no replica acknowledges fails, so every check must pass, exclusion
// included; locking resumes once the old primary is back as a replica.
func sentinelFailover(t *testing.T) {
	type variant struct {
		label        string
		fenced, wait bool
	}
	for _, v := range []variant{{"unfenced", false, false}, {"fenced", true, false}, {"fenced, wait_replicas=1", true, true}} {
		t.Run(strings.ReplaceAll(v.label, " ", ""), func(t *testing.T) {
			l, tp := private(t, "redis-sentinel")
			primary, replica := tp.Nodes[0], tp.Nodes[1]
			url := tp.URL()
			if v.wait {
				url += "&wait_replicas=1&wait_timeout=200ms"
			}
			b := sentinelB(url)
			name := "12 Sentinel failover to a replica that missed the last writes (" + v.label + ")"
			hold := victimHold(sentinelHold)
			if v.wait {
				hold = nil
			}
			r := Start(t, b, RunOptions{Workers: 3, Fenced: v.fenced, Hold: hold})
			r.WaitFor(time.Minute, "5 writes", countWrites(5))
			if !v.wait {
				// Cut right after the victim's release: its next hold,
				// soon after, is then one the replica never sees, and the
				// cut is short (a replica cut off from its primary for
				// more than ten down-after periods is never promoted).
				mark := Mono()
				r.WaitFor(time.Minute, "the victim's release", func(e Event) bool {
					return e.Kind == EvRelease && e.Worker == 0 && e.Mono > mark
				})
			}

			// The replica falls behind: the primary refuses it PSYNC, and
			// its replication link is dropped.
			pc := redisAdmin(t, primary.Addr())
			if err := pc.Do(ctx(t), "ACL", "SETUSER", "default", "-psync", "-sync").Err(); err != nil {
				t.Fatal(err)
			}
			if err := pc.Do(ctx(t), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
				t.Fatal(err)
			}
			cut := Mono()
			var victim Event
			if v.wait {
				// No acquire is acknowledged by a replica now: give the
				// workers time to try.
				time.Sleep(2 * time.Second)
			} else {
				acq := r.WaitFor(time.Minute, "the victim's acquisition after the cut", acquiredAfter(0, cut))
				victim = r.WaitFor(time.Minute, "the victim's read", func(e Event) bool { return isRead(0)(e) && e.Mono >= acq.Mono })
			}
			pi := parseInfoLines(pc.Info(ctx(t), "replication").Val())
			ri := parseInfoLines(redisAdmin(t, replica.Addr()).Info(ctx(t), "replication").Val())
			t.Logf("before the kill: primary offset %s, replica offset %s, link %s",
				pi["master_repl_offset"], ri["slave_repl_offset"], ri["master_link_status"])

			if err := l.Kill(ctx(t), primary.Name); err != nil {
				t.Fatal(err)
			}
			promoted := waitPromoted(t, tp, replica)
			t.Logf("%s promoted %v after the kill", replica.Name, promoted.Round(time.Millisecond))
			if v.wait {
				// WAIT needs a replica: the old primary comes back empty
				// and the Sentinels make it replicate the new one.
				if err := l.Start(ctx(t), primary.Name); err != nil {
					t.Fatal(err)
				}
				waitSettled(t, tp, replica, primary)
			}
			r.Healed()
			heal := Mono()
			if v.wait {
				more := countWrites(5)
				r.WaitFor(time.Minute, "5 writes after the failover", func(e Event) bool { return e.Mono > heal && more(e) })
			} else {
				r.WaitFor(time.Minute, "a write by the next holder", writeAfter(victim))
				r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
				more := countWrites(3)
				r.WaitFor(time.Minute, "3 writes after the failover", func(e Event) bool { return e.Mono > heal && more(e) })
			}
			h := r.Stop()
			switch {
			case v.wait:
				judge(t, name, b, h, expect{must: allChecks})
			case v.fenced:
				judge(t, name, b, h, expect{must: []string{"stale-token", "monotone-tokens", "lost-updates", "loss-before-expiry", "liveness"}})
				if !rejected(h, victim) {
					t.Errorf("the victim's stale write was not rejected")
				}
			default:
				judge(t, name, b, h, expect{must: []string{"monotone-tokens"}, canary: []string{"exclusion", "stale-token", "lost-updates"}})
			}
		})
	}
}

// waitPromoted waits until the Sentinels name n as the primary and n says
// it is one, and returns how long that took.
func waitPromoted(t *testing.T, tp topology.Topology, n topology.Node) time.Duration {
	t.Helper()
	start := time.Now()
	sentinels := sentinelClients(t, tp)
	nc := redisAdmin(t, n.Addr())
	port := strconv.Itoa(n.Port(topology.Client))
	for time.Since(start) < time.Minute {
		agree := 0
		for _, sc := range sentinels {
			if a, err := sc.GetMasterAddrByName(ctx(t), topology.SentinelMaster).Result(); err == nil && len(a) == 2 && a[1] == port {
				agree++
			}
		}
		role, _ := nc.Do(ctx(t), "ROLE").Slice()
		if agree == len(sentinels) && len(role) > 0 && role[0] == "master" {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s was not promoted within a minute", n.Name)
	return 0
}

// sentinelClients are clients of tp's Sentinels, closed when the test ends.
func sentinelClients(t *testing.T, tp topology.Topology) []*goredis.SentinelClient {
	t.Helper()
	var sentinels []*goredis.SentinelClient
	for _, s := range tp.Nodes {
		if tp.IsSentinel(s) {
			sc := goredis.NewSentinelClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = sc.Close() })
			sentinels = append(sentinels, sc)
		}
	}
	return sentinels
}

// waitSettled waits, after the old primary came back, until every Sentinel
// names the same one of nodes as the master and that master has a replica
// in sync. Which one does not matter to the cell: the Sentinels make the
// returning old primary replicate the new one, but they have also been
// seen to fail back to it (empty as it is) and to take most of a minute
// to reconcile. After 30s without that, the other node is made to
// replicate the master the Sentinels name, and the Sentinels have 30s
// more; a node made to replicate the one they no longer name would leave
// the clients writing to a replica, read-only.
func waitSettled(t *testing.T, tp topology.Topology, nodes ...topology.Node) {
	t.Helper()
	sentinels := sentinelClients(t, tp)
	admin := map[string]*goredis.Client{}
	for _, n := range nodes {
		admin[n.Name] = redisAdmin(t, n.Addr())
	}
	named := func() (topology.Node, bool) {
		port := ""
		for _, sc := range sentinels {
			a, err := sc.GetMasterAddrByName(ctx(t), topology.SentinelMaster).Result()
			if err != nil || len(a) != 2 || (port != "" && a[1] != port) {
				return topology.Node{}, false
			}
			port = a[1]
		}
		for _, n := range nodes {
			if strconv.Itoa(n.Port(topology.Client)) == port {
				return n, true
			}
		}
		return topology.Node{}, false
	}
	settled := func(d time.Duration) (topology.Node, bool, bool) {
		var m topology.Node
		agreed := false
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if m, agreed = named(); agreed {
				info := parseInfoLines(admin[m.Name].Info(ctx(t), "replication").Val())
				if info["role"] == "master" && info["connected_slaves"] == "1" && strings.Contains(info["slave0"], "state=online") {
					return m, true, true
				}
			}
		}
		return m, agreed, false
	}
	m, agreed, ok := settled(30 * time.Second)
	if ok {
		return
	}
	if !agreed {
		t.Fatalf("the Sentinels do not name one master within 30s of the old primary's return")
	}
	host, port, err := net.SplitHostPort(m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Name == m.Name {
			continue
		}
		t.Logf("%s, the master the Sentinels name, has no replica in sync after 30s: REPLICAOF %s on %s", m.Name, m.Addr(), n.Name)
		if err := admin[n.Name].Do(ctx(t), "REPLICAOF", host, port).Err(); err != nil {
			t.Fatalf("REPLICAOF on %s: %v", n.Name, err)
		}
	}
	if _, _, ok := settled(30 * time.Second); !ok {
		t.Fatalf("no master named by every Sentinel with a replica in sync within a minute")
	}
}

func parseInfoLines(s string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

// Scenarios 6b and 7d: the servers restarted from a snapshot older than
// the last acquisitions (as a crash does with RDB persistence, or a restore
// from a backup). A victim holds the lock when they are killed: the
// snapshot predates its lock, so the next holder overlaps it (exclusion is
// lost as with an empty restart, scenario 6); the counters come back behind
// tokens already issued, so only tokens floored at the server clock keep
// the stale write out and the tokens increasing.
//
// acquisitions is how many acquisitions there are between the snapshot and
// the kill: enough that the tokens issued meanwhile run ahead of what the
// counters gain while the servers come back (on Redlock, attempts that
// reach only the masters already restarted still raise their counters).
func snapshotRollback(t *testing.T, b Backend, name string, nodes []string, acquisitions int) {
	b.TTL = 3 * time.Second
	var admins []*goredis.Client
	for _, n := range nodes {
		addr, err := launcher.Addr(n)
		if err != nil {
			t.Fatal(err)
		}
		c := redisAdmin(t, addr)
		admins = append(admins, c)
		// Later restarts (scenario 6) must come back empty again.
		dir, err := c.ConfigGet(ctx(t), "dir").Result()
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir["dir"], "dump.rdb")
		t.Cleanup(func() { _ = os.Remove(file) })
	}
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: 3, Fenced: fenced, Hold: victimHold(2 * time.Second)})
		r.WaitFor(time.Minute, "5 writes", countWrites(5))
		for i, c := range admins {
			if err := c.Save(ctx(t)).Err(); err != nil {
				t.Fatalf("SAVE on %s: %v", nodes[i], err)
			}
		}
		saved := Mono()
		third := r.WaitFor(time.Minute, "acquisitions after the snapshot", acquisitionsAfter(acquisitions, saved))
		// Every lock key in the snapshot has expired by then, so the
		// next holder does not wait for one after the restart.
		after := max(third.Mono, saved+int64(b.TTL+500*time.Millisecond))
		victim := r.WaitFor(time.Minute, "the victim's read after those", func(e Event) bool { return isRead(0)(e) && e.Mono > after })
		kill(t, nodes...)
		r.Healed()
		start(t, nodes...)
		r.WaitFor(time.Minute, "a write by the next holder", writeAfter(victim))
		r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
		up := Mono()
		more := countWrites(3)
		r.WaitFor(time.Minute, "3 writes after the restart", func(e Event) bool { return e.Mono > up && more(e) })
		h := r.Stop()
		if fenced {
			// Exclusion is lost for the holds newer than the snapshot when
			// the timing lets a second holder in during the victim's
			// hold, and not otherwise: it is neither required nor a
			// canary here (the unfenced run is the canary).
			judge(t, name+" (fenced)", b, h,
				expect{must: []string{"stale-token", "monotone-tokens", "lost-updates", "liveness"}})
			if !rejected(h, victim) {
				t.Errorf("the victim's stale write was not rejected")
			}
		} else {
			judge(t, name+" (unfenced)", b, h,
				expect{must: []string{"monotone-tokens"}, canary: []string{"exclusion", "stale-token", "lost-updates"}})
		}
	}
}

// clusterB is Redis Cluster for the failover scenario: a failed master is
// noticed after the node timeout (5 s) and its replica elected a few
// seconds later, so the victim's hold spans that. Liveness is counted from
// the promotion: the clients must find the new master at once.
func clusterB(url string) Backend {
	return Backend{Name: "redis-cluster", URL: url, TTL: 3 * time.Second, Liveness: 3 * time.Second}
}

const clusterHold = 12 * time.Second

// Scenario 12: a Redis Cluster master fails over to its replica after the
// replica missed the last writes (as in scenario 12, the master refuses it
// PSYNC and drops its link): the master serving the lock's slot is killed
// and the Cluster promotes the replica, which knows neither the last locks
// nor their tokens. Unfenced is a canary; fenced must keep the tokens
// increasing and the data right.
func clusterFailover(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(strings.Trim(fencedLabel(fenced), " ()"), func(t *testing.T) {
			l, tp := private(t, "redis-cluster")
			b := clusterB(tp.URL())
			name := "13 Cluster failover to a replica that missed the last writes" + fencedLabel(fenced)
			r := Start(t, b, RunOptions{Workers: 3, Fenced: fenced, Hold: victimHold(clusterHold)})
			r.WaitFor(time.Minute, "5 writes", countWrites(5))

			master, replica := slotNodes(t, tp, redisbk.LockKey(redisbk.DefaultPrefix, r.Key))
			t.Logf("the lock's slot is on %s, replicated to %s", master.Name, replica.Name)
			mark := Mono()
			r.WaitFor(time.Minute, "the victim's release", func(e Event) bool {
				return e.Kind == EvRelease && e.Worker == 0 && e.Mono > mark
			})
			mc := redisAdmin(t, master.Addr())
			if err := mc.Do(ctx(t), "ACL", "SETUSER", "default", "-psync", "-sync").Err(); err != nil {
				t.Fatal(err)
			}
			if err := mc.Do(ctx(t), "CLIENT", "KILL", "TYPE", "replica").Err(); err != nil {
				t.Fatal(err)
			}
			cut := Mono()
			acq := r.WaitFor(time.Minute, "the victim's acquisition after the cut", acquiredAfter(0, cut))
			victim := r.WaitFor(time.Minute, "the victim's read", func(e Event) bool { return isRead(0)(e) && e.Mono >= acq.Mono })
			pi := parseInfoLines(mc.Info(ctx(t), "replication").Val())
			ri := parseInfoLines(redisAdmin(t, replica.Addr()).Info(ctx(t), "replication").Val())
			t.Logf("before the kill: master offset %s, replica offset %s, link %s",
				pi["master_repl_offset"], ri["slave_repl_offset"], ri["master_link_status"])

			killed := time.Now()
			if err := l.Kill(ctx(t), master.Name); err != nil {
				t.Fatal(err)
			}
			rc := redisAdmin(t, replica.Addr())
			for {
				role, _ := rc.Do(ctx(t), "ROLE").Slice()
				info := parseInfoLines(rc.ClusterInfo(ctx(t)).Val())
				if len(role) > 0 && role[0] == "master" && info["cluster_state"] == "ok" {
					break
				}
				if time.Since(killed) > time.Minute {
					t.Fatalf("%s was not promoted within a minute", replica.Name)
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("%s promoted %v after the kill", replica.Name, time.Since(killed).Round(time.Millisecond))
			r.Healed()
			heal := Mono()
			r.WaitFor(time.Minute, "a write by the next holder", writeAfter(victim))
			r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
			more := countWrites(3)
			r.WaitFor(time.Minute, "3 writes after the failover", func(e Event) bool { return e.Mono > heal && more(e) })
			h := r.Stop()
			if fenced {
				judge(t, name, b, h, expect{must: []string{"stale-token", "monotone-tokens", "lost-updates", "loss-before-expiry", "liveness"}})
				if !rejected(h, victim) {
					t.Errorf("the victim's stale write was not rejected")
				}
			} else {
				judge(t, name, b, h, expect{must: []string{"monotone-tokens"}, canary: []string{"exclusion", "stale-token", "lost-updates"}})
			}
		})
	}
}

// slotNodes returns the master that serves key's slot in the Cluster tp,
// and its replica.
func slotNodes(t *testing.T, tp topology.Topology, key string) (master, replica topology.Node) {
	t.Helper()
	c := redisAdmin(t, tp.Nodes[0].Addr())
	slot, err := c.ClusterKeySlot(ctx(t), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[string]topology.Node{}
	for _, n := range tp.Nodes {
		byAddr[n.Addr()] = n
	}
	shards, err := c.ClusterShards(ctx(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		serves := false
		for _, r := range s.Slots {
			serves = serves || (r.Start <= slot && slot <= r.End)
		}
		if !serves {
			continue
		}
		var m, r []topology.Node
		for _, sn := range s.Nodes {
			n, ok := byAddr[net.JoinHostPort(sn.IP, strconv.FormatInt(sn.Port, 10))]
			switch {
			case ok && sn.Role == "master":
				m = append(m, n)
			case ok && sn.Role == "replica":
				r = append(r, n)
			}
		}
		if len(m) == 1 && len(r) == 1 {
			return m[0], r[0]
		}
	}
	t.Fatalf("no master with one replica serves slot %d: %+v", slot, shards)
	return
}
