package main_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

// doctorDoc is lockctl doctor --json's document.
type doctorDoc struct {
	Backend  string            `json:"backend"`
	Findings []lockctl.Finding `json:"findings"`
	Status   int               `json:"status"`
}

// doctor runs lockctl doctor --json and checks that its exit status is the
// document's.
func doctor(t *testing.T, args ...string) doctorDoc {
	t.Helper()
	r := runLockctl(t, 2*time.Minute, append([]string{"doctor", "--json"}, args...)...)
	var doc doctorDoc
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("doctor %q: exit %d, %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
	}
	if r.code != doc.Status {
		t.Fatalf("doctor %q: exit %d but status %d in the document", args, r.code, doc.Status)
	}
	return doc
}

// levels maps each finding's ID to its worst level.
func levels(doc doctorDoc) map[string]lockctl.Level {
	rank := map[lockctl.Level]int{lockctl.LevelOK: 0, lockctl.LevelInfo: 1, lockctl.LevelWarning: 2, lockctl.LevelBroken: 3}
	m := map[string]lockctl.Level{}
	for _, f := range doc.Findings {
		if old, ok := m[f.ID]; !ok || rank[f.Level] > rank[old] {
			m[f.ID] = f.Level
		}
	}
	return m
}

// expectFindings checks doc's exit status and that its warnings and
// breaks are exactly want (IDs to levels); the IDs in present must be
// there at any level.
func expectFindings(t *testing.T, doc doctorDoc, status int, want map[string]lockctl.Level, present ...string) {
	t.Helper()
	got := levels(doc)
	for id, lv := range got {
		if (lv == lockctl.LevelWarning || lv == lockctl.LevelBroken) && want[id] != lv {
			t.Errorf("%s: unexpected %s %s", doc.Backend, lv, id)
		}
	}
	for id, lv := range want {
		if got[id] != lv {
			t.Errorf("%s: %s is %q; want %s", doc.Backend, id, got[id], lv)
		}
	}
	for _, id := range present {
		if _, ok := got[id]; !ok {
			t.Errorf("%s: no finding %s", doc.Backend, id)
		}
	}
	if doc.Status != status {
		t.Errorf("%s: status %d; want %d", doc.Backend, doc.Status, status)
	}
	if t.Failed() {
		out, _ := json.MarshalIndent(doc, "", "  ")
		t.Logf("%s", out)
	}
}

// redisServer starts a private redis-server on a free loopback port with
// extra arguments, for settings the shared servers do not have.
func redisServer(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.Required("DLOCK_REDIS_URL") {
			t.Fatalf("redis-server: %v", err)
		}
		t.Skipf("redis-server: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	all := append([]string{"--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--dir", t.TempDir(),
		"--save", "", "--daemonize", "no", "--logfile", ""}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server %v not listening: %v", args, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Redis that may evict keys breaks exclusion: status 2. appendfsync
// everysec and a replica without wait_replicas or min-replicas-to-write
// are warnings; wait_replicas in the URL answers the first.
func TestDoctorRedisMisconfigured(t *testing.T) {
	t.Run("allkeys-lru", func(t *testing.T) {
		addr := redisServer(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru", "--appendonly", "yes", "--appendfsync", "always")
		// dlock.Open refuses such a server; doctor still examines it.
		doc := doctor(t, "redis://"+addr)
		expectFindings(t, doc, lockctl.ExitDoctorBroken, map[string]lockctl.Level{"redis.maxmemory-policy": lockctl.LevelBroken, "open": lockctl.LevelBroken})
		doc = doctor(t, "redis://"+addr+"?allow_eviction=true")
		expectFindings(t, doc, lockctl.ExitDoctorBroken, map[string]lockctl.Level{"redis.maxmemory-policy": lockctl.LevelBroken})
		r := runLockctl(t, time.Minute, "doctor", "redis://"+addr+"?allow_eviction=true")
		if r.code != 2 || !strings.Contains(r.stdout, "maxmemory-policy allkeys-lru") || !strings.Contains(r.stdout, "noeviction") {
			t.Errorf("doctor (text): exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("appendfsync-everysec", func(t *testing.T) {
		addr := redisServer(t, "--appendonly", "yes", "--appendfsync", "everysec")
		doc := doctor(t, "redis://"+addr)
		expectFindings(t, doc, lockctl.ExitDoctorWarn, map[string]lockctl.Level{"redis.appendfsync": lockctl.LevelWarning})
		for _, f := range doc.Findings {
			if f.ID == "redis.appendfsync" && (!strings.Contains(f.Meaning, "TIME") || !strings.Contains(f.Fix, "appendfsync always")) {
				t.Errorf("appendfsync finding %+v: want the token floor and the fix explained", f)
			}
		}
	})
	t.Run("replica", func(t *testing.T) {
		aof := []string{"--appendonly", "yes", "--appendfsync", "always"}
		master := redisServer(t, aof...)
		host, port, _ := strings.Cut(master, ":")
		redisServer(t, append(aof, "--replicaof", host, port)...)
		want := map[string]lockctl.Level{"redis.wait-replicas": lockctl.LevelWarning, "redis.min-replicas-to-write": lockctl.LevelWarning}
		var doc doctorDoc
		for deadline := time.Now().Add(30 * time.Second); ; {
			doc = doctor(t, "redis://"+master)
			if levels(doc)["redis.wait-replicas"] != "" || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond) // the replica is still connecting
		}
		expectFindings(t, doc, lockctl.ExitDoctorWarn, want)
		doc = doctor(t, "redis://"+master+"?wait_replicas=1")
		expectFindings(t, doc, lockctl.ExitDoctorWarn, map[string]lockctl.Level{"redis.min-replicas-to-write": lockctl.LevelWarning}, "redis.wait-replicas")
	})
}

// etcdBuggy reports whether an etcd version has lease bug 15247 (fixed in
// 3.4.25 and 3.5.8), by its own table.
func etcdBuggy(v string) bool {
	var maj, min, patch int
	fmt.Sscanf(v, "%d.%d.%d", &maj, &min, &patch)
	return maj == 3 && (min < 4 || min == 4 && patch < 25 || min == 5 && patch < 8)
}

// etcdVersion asks the first endpoint of an etcd URL for its version.
func etcdVersion(t *testing.T, url string) string {
	t.Helper()
	host := strings.SplitN(strings.TrimPrefix(url, "etcd://"), ",", 2)[0]
	resp, err := http.Get("http://" + strings.SplitN(host, "/", 2)[0] + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Server
}

// The standard topologies of make test: doctor flags what is really there
// (no persistence on the test Redis, Redlock's instances on one host, the
// etcd release with lease bug 15247) and nothing else.
func TestDoctorHealthy(t *testing.T) {
	warn, common := lockctl.LevelWarning, []string{"clock.skew", "rtt"}
	cases := []struct {
		name, envVar string
		status       int
		want         map[string]lockctl.Level
		present      []string
	}{
		{"redis", "DLOCK_REDIS_URL", 1, map[string]lockctl.Level{"redis.persistence": warn}, []string{"redis.maxmemory-policy", "redis.replicas"}},
		{"redlock", "DLOCK_REDLOCK_URL", 1, map[string]lockctl.Level{"redis.persistence": warn, "redlock.same-host": warn},
			[]string{"redlock.instances", "redlock.timeout", "redis.maxmemory-policy"}},
		{"etcd", "DLOCK_ETCD_URL", 0, nil, []string{"etcd.cluster-size", "etcd.health", "etcd.alarms", "etcd.compaction"}},
		{"etcd3", "DLOCK_ETCD3_URL", 0, nil, []string{"etcd.cluster-size", "etcd.health", "etcd.alarms", "etcd.compaction"}},
		{"zookeeper", "DLOCK_ZK_URL", 0, nil, []string{"zk.session-timeout", "zk.version", "zk.ensemble"}},
		{"zookeeper3", "DLOCK_ZK3_URL", 0, nil, []string{"zk.session-timeout", "zk.version", "zk.ensemble"}},
		{"consul", "DLOCK_CONSUL_URL", 0, nil, []string{"consul.version", "consul.session-ttl", "consul.lock-delay", "consul.servers"}},
		{"postgres", "DLOCK_POSTGRES_URL", 0, nil, []string{"postgres.version", "postgres.synchronous-commit"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			url := testenv.Endpoint(t, c.envVar)
			want := map[string]lockctl.Level{}
			for k, v := range c.want {
				want[k] = v
			}
			status := c.status
			if strings.HasPrefix(url, "etcd://") {
				if etcdBuggy(etcdVersion(t, url)) {
					want["etcd.lease-bug-15247"], status = warn, 1
				} else {
					c.present = append(c.present, "etcd.version")
				}
			}
			doc := doctor(t, url)
			expectFindings(t, doc, status, want, append(c.present, common...)...)
			if strings.HasSuffix(c.name, "3") {
				for _, f := range doc.Findings {
					if (f.ID == "etcd.cluster-size" || f.ID == "zk.ensemble") && !strings.Contains(f.Summary, "3 ") {
						t.Errorf("%s: %q; want 3 members", f.ID, f.Summary)
					}
				}
			}
		})
	}
}

// Settings given in the URL or by --ttl that doctor must flag on the
// healthy servers: a lease unlike ZooKeeper's session timeout, one below
// Consul's session_ttl_min, synchronous_commit off for the lock role's
// sessions, a Redlock per-instance timeout below the round trip.
func TestDoctorURLSettings(t *testing.T) {
	broken, warn := lockctl.LevelBroken, lockctl.LevelWarning
	for _, c := range []struct {
		name, envVar, query string
		args                []string
		status              int
		want                map[string]lockctl.Level
	}{
		{"zookeeper-ttl", "DLOCK_ZK_URL", "", []string{"--ttl", "3s"}, 2, map[string]lockctl.Level{"zk.session-timeout": broken}},
		{"consul-ttl", "DLOCK_CONSUL_URL", "", []string{"--ttl", "5s"}, 1, map[string]lockctl.Level{"consul.session-ttl": warn}},
		{"postgres-async", "DLOCK_POSTGRES_URL", "options=-c%20synchronous_commit%3Doff", nil, 1, map[string]lockctl.Level{"postgres.synchronous-commit": warn}},
		{"redlock-timeout", "DLOCK_REDLOCK_URL", "timeout=1us", nil, 2,
			map[string]lockctl.Level{"redlock.timeout": broken, "redis.persistence": warn, "redlock.same-host": warn}},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := testenv.Endpoint(t, c.envVar)
			if c.query != "" {
				sep := "?"
				if strings.Contains(url, "?") {
					sep = "&"
				}
				url += sep + c.query
			}
			doc := doctor(t, append(c.args, url)...)
			expectFindings(t, doc, c.status, c.want)
		})
	}
}

// A URL dlock.Open refuses is a usage error; a backend that does not
// answer is a backend error, never a clean bill of health.
func TestDoctorErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, c := range []struct {
		url  string
		code int
	}{
		{"redis://" + closed + "?bogus=1", lockctl.ExitUsage},
		{"redis://" + closed, lockctl.ExitBackend},
		{"etcd://" + closed + "?dial_timeout=1s", lockctl.ExitBackend},
		{"postgres://u:p@" + closed + "/db?connect_timeout=1", lockctl.ExitBackend},
	} {
		r := runLockctl(t, time.Minute, "doctor", c.url)
		if r.code != c.code || r.stdout != "" {
			t.Errorf("doctor %s: exit %d, stdout %q; want %d and no report\n%s", c.url, r.code, r.stdout, c.code, r.stderr)
		}
	}
}
