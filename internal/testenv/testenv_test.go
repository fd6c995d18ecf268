package testenv

import (
	"runtime"
	"testing"
)

func TestRequired(t *testing.T) {
	cases := []struct {
		require, name string
		want          bool
	}{
		{"", "DLOCK_REDIS_URL", false},
		{"all", "DLOCK_REDIS_URL", true},
		{"ALL", "DLOCK_ZK3_URL", true},
		{"redis", "DLOCK_REDIS_URL", true},
		{"redis", "DLOCK_REDIS_CLUSTER_URL", false},
		{"redlock", "DLOCK_REDIS_URL", false},
		{"etcd3, redis-cluster", "DLOCK_REDIS_CLUSTER_URL", true},
		{"etcd3 redis_cluster", "DLOCK_ETCD3_URL", true},
		{"etcd3", "DLOCK_ETCD_URL", false},
		{"zookeeper", "DLOCK_ZK_URL", true},
		{"zookeeper3", "DLOCK_ZK_URL", false},
		{"zk3", "DLOCK_ZK3_URL", true},
		{"DLOCK_CONSUL_URL", "DLOCK_CONSUL_URL", true},
		{"postgres", "DLOCK_POSTGRES_URL", true},
	}
	for _, c := range cases {
		t.Setenv(RequireVar, c.require)
		if got := Required(c.name); got != c.want {
			t.Errorf("%s=%q: Required(%s) = %v, want %v", RequireVar, c.require, c.name, got, c.want)
		}
	}
}

func TestEndpointSet(t *testing.T) {
	t.Setenv("DLOCK_TESTENV_PROBE_URL", " redis://127.0.0.1:1 ")
	if got := Endpoint(t, "DLOCK_TESTENV_PROBE_URL"); got != "redis://127.0.0.1:1" {
		t.Fatalf("Endpoint = %q", got)
	}
}

// recorder captures Skipf/Fatalf without ending the calling test; like
// testing.T they end the goroutine that calls them.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skipf(string, ...any)  { r.skipped = true; runtime.Goexit() }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }

func run(r *recorder, name string) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Endpoint(r, name)
	}()
	<-done
}

func TestEndpointMissing(t *testing.T) {
	t.Setenv("DLOCK_TESTENV_PROBE_URL", "")

	t.Setenv(RequireVar, "")
	r := &recorder{TB: t}
	run(r, "DLOCK_TESTENV_PROBE_URL")
	if !r.skipped || r.failed {
		t.Errorf("not required: skipped=%v failed=%v, want a skip", r.skipped, r.failed)
	}

	t.Setenv(RequireVar, "all")
	r = &recorder{TB: t}
	run(r, "DLOCK_TESTENV_PROBE_URL")
	if !r.failed || r.skipped {
		t.Errorf("required: skipped=%v failed=%v, want a failure", r.skipped, r.failed)
	}
}
