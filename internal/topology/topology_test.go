package topology

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckAll(t *testing.T) {
	if err := Check(All()); err != nil {
		t.Fatal(err)
	}
}

// The ports, variables and URLs are a contract with the backend tests and
// CONTRIBUTING.md's topology table: changing one must be a deliberate act.
func TestContract(t *testing.T) {
	want := map[string]string{
		"DLOCK_REDIS_URL":          "redis://127.0.0.1:6379",
		"DLOCK_REDLOCK_URL":        "redlock://127.0.0.1:6380,127.0.0.1:6381,127.0.0.1:6382,127.0.0.1:6383,127.0.0.1:6384",
		"DLOCK_REDIS_CLUSTER_URL":  "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
		"DLOCK_ETCD_URL":           "etcd://127.0.0.1:2379",
		"DLOCK_ETCD3_URL":          "etcd://127.0.0.1:2381,127.0.0.1:2382,127.0.0.1:2383",
		"DLOCK_ZK_URL":             "zk://127.0.0.1:2181",
		"DLOCK_ZK3_URL":            "zk://127.0.0.1:2182,127.0.0.1:2183,127.0.0.1:2184",
		"DLOCK_CONSUL_URL":         "consul://127.0.0.1:8500",
		"DLOCK_POSTGRES_URL":       "postgres://dlock:dlock@127.0.0.1:5433/dlock?sslmode=disable",
		"DLOCK_REDIS_SENTINEL_URL": "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380,127.0.0.1:26381?master_name=mymaster",
	}
	got := map[string]string{}
	for _, tp := range All() {
		got[tp.EnvVar] = tp.URL()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d variables, want %d: %v", len(got), len(want), got)
	}

	ports := map[string]map[string]int{
		"redis-cluster-3":  {Client: 7002, Bus: 17002},
		"redis-cluster-6":  {Client: 7005, Bus: 17005},
		"etcd":             {Client: 2379, Peer: 12379},
		"etcd3-2":          {Client: 2382, Peer: 12382},
		"zookeeper3-3":     {Client: 2184, Quorum: 2890, Election: 3890},
		"consul":           {Client: 8500, GRPC: 8502, ServerRPC: 8300, SerfLAN: 8301, SerfWAN: 8302, DNS: 8600},
		"redis-sentinel-1": {Client: 6385},
		"redis-sentinel-2": {Client: 6386},
		"redis-sentinel-5": {Client: 26381},
	}
	for node, ps := range ports {
		_, n, ok := FindNode(All(), node)
		if !ok {
			t.Errorf("no node %s", node)
			continue
		}
		for name, num := range ps {
			if n.Port(name) != num {
				t.Errorf("%s %s port = %d, want %d", node, name, n.Port(name), num)
			}
		}
	}
}

func TestCheckRejects(t *testing.T) {
	ts := All()
	ts[1].Nodes[2].Ports[0].Number = ts[0].Nodes[0].Port(Client)
	if err := Check(ts); err == nil || !strings.Contains(err.Error(), "6379") {
		t.Errorf("duplicate port: err = %v", err)
	}
	ts = All()
	ts[3].Nodes[0].Ports = ts[3].Nodes[0].Ports[:1] // etcd without a peer port
	if err := Check(ts); err == nil || !strings.Contains(err.Error(), "peer") {
		t.Errorf("missing peer port: err = %v", err)
	}
}

func TestFindNode(t *testing.T) {
	for _, c := range []struct{ name, topo, node string }{
		{"redlock-4", "redlock", "redlock-4"},
		{"etcd3-2", "etcd3", "etcd3-2"},
		{"zookeeper3-1", "zookeeper3", "zookeeper3-1"},
		{"consul", "consul", "consul"},
		{"consul-1", "consul", "consul"},
	} {
		tp, n, ok := FindNode(All(), c.name)
		if !ok || tp.Name != c.topo || n.Name != c.node {
			t.Errorf("FindNode(%s) = %s %s %v", c.name, tp.Name, n.Name, ok)
		}
	}
	if _, _, ok := FindNode(All(), "redlock-6"); ok {
		t.Error("FindNode(redlock-6) found a node")
	}
}

func TestOffset(t *testing.T) {
	ts := Offset(All(), 20000)
	if err := Check(ts); err != nil {
		t.Fatal(err)
	}
	if got := ts[2].Nodes[1].Port(Bus); got != 37001 {
		t.Errorf("redis-cluster-2 bus port = %d, want 37001", got)
	}
	if got := All()[2].Nodes[1].Port(Bus); got != 17001 {
		t.Errorf("Offset changed the original: %d", got)
	}
}

// TestComposeFilesUpToDate fails when a compose file was edited by hand or
// the topology changed without regenerating them.
func TestComposeFilesUpToDate(t *testing.T) {
	dir := filepath.Join("..", "..", "compose")
	want := map[string][]byte{"compose.yaml": ComposeAll(All())}
	for _, tp := range All() {
		want[ComposeFile(tp)] = Compose(tp)
	}
	for name, w := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v (run `go run ./tools/cmd/dlockenv compose`)", err)
			continue
		}
		if !bytes.Equal(got, w) {
			t.Errorf("compose/%s is out of date: run `go run ./tools/cmd/dlockenv compose`", name)
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if _, ok := want[filepath.Base(f)]; !ok {
			t.Errorf("compose/%s belongs to no topology", filepath.Base(f))
		}
	}
}
