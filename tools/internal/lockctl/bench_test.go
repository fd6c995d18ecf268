package lockctl

import (
	"strings"
	"testing"
	"time"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_set:calls=4,usec=8,usec_per_call=2.00\r\n" +
		"cmdstat_info:calls=99,usec=1\r\n" +
		"cmdstat_client|setinfo:calls=7,usec=1\r\n"
	n, err := parseCommandStats(info)
	if err != nil || n != 14 {
		t.Fatalf("parseCommandStats = %d, %v; want 14 (INFO and connection setup left out)", n, err)
	}
	if _, err := parseCommandStats("cmdstat_get:calls=x"); err == nil {
		t.Fatal("a malformed count parsed")
	}
}

func TestSumMetric(t *testing.T) {
	text := `# HELP grpc_server_msg_received_total Total number of RPC stream messages received on the server.
grpc_server_msg_received_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 12
grpc_server_msg_received_total{grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 30
grpc_server_msg_received_total_other 1000
grpc_server_msg_sent_total{grpc_method="Txn"} 5
`
	n, err := sumMetric(strings.NewReader(text), "grpc_server_msg_received_total")
	if err != nil || n != 42 {
		t.Fatalf("sumMetric = %d, %v; want 42", n, err)
	}
}

func TestPercentiles(t *testing.T) {
	s := newSampler()
	for i := 1; i <= 1000; i++ {
		s.add(time.Duration(i) * time.Millisecond)
	}
	p50, p99 := percentiles([]*sampler{s})
	if p50 != 500*time.Millisecond || p99 != 990*time.Millisecond {
		t.Fatalf("p50 %v p99 %v; want 500ms 990ms", p50, p99)
	}
	// Past the cap, the reservoir keeps a uniform sample.
	big := newSampler()
	for i := range 4 * sampleCap {
		big.add(time.Duration(i%100) * time.Microsecond)
	}
	if len(big.samples) != sampleCap {
		t.Fatalf("%d samples kept; want the cap %d", len(big.samples), sampleCap)
	}
	p50, _ = percentiles([]*sampler{big})
	if p50 < 45*time.Microsecond || p50 > 55*time.Microsecond {
		t.Fatalf("p50 of a uniform 0-99µs sample = %v", p50)
	}
	if a, b := percentiles(nil); a != 0 || b != 0 {
		t.Fatal("percentiles of nothing are not zero")
	}
}

func TestShortNames(t *testing.T) {
	rs := []benchResult{{Backend: "mem://"}, {Backend: "etcd://127.0.0.1:2379"}, {Backend: "etcd://127.0.0.1:2381,127.0.0.1:2382"}, {Backend: "redis://<x>:1"}}
	got := shortNames(rs)
	if got["mem://"] != "mem" || got["etcd://127.0.0.1:2379"] != "etcd 127.0.0.1:2379" || strings.ContainsAny(got["redis://<x>:1"], "<>") {
		t.Fatalf("shortNames = %q", got)
	}
}

func TestSizeSVG(t *testing.T) {
	in := `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 400 300"><rect/></svg>`
	if got := sizeSVG(in); !strings.HasPrefix(got, `<svg width="400" height="300" xmlns=`) {
		t.Fatalf("sizeSVG = %q", got)
	}
}

func TestParseBench(t *testing.T) {
	sys, _, errb := testIO(nil)
	cfg, _, ok := parseBench([]string{"--backend", "mem://", "--backend", "file:///tmp/x", "--scenario", "contended", "--duration", "1s"}, sys)
	if !ok || len(cfg.urls) != 2 || len(cfg.scenarios) != 1 || cfg.duration != time.Second {
		t.Fatalf("parseBench = %+v (%s)", cfg, errb)
	}
	cfg, _, ok = parseBench([]string{"--backend", "mem://"}, sys)
	if !ok || len(cfg.scenarios) != 3 || cfg.parallel != 8 || cfg.contenders != 8 {
		t.Fatalf("defaults: %+v", cfg)
	}
	if _, code, ok := parseBench([]string{"--backend", "mem://", "--backend", "mem://"}, sys); ok || code != ExitUsage {
		t.Fatal("a backend given twice was accepted")
	}
}

func TestCompactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redlock://a:1,b:2,c:3":   "redlock://a:1+2",
		"etcd://a:1,b:2/p?ttl=5s": "etcd://a:1+1/p?ttl=5s",
		"redis://127.0.0.1:6379":  "redis://127.0.0.1:6379",
		"file:///tmp/x":           "file:///tmp/x",
	} {
		if got := compactURL(in); got != want {
			t.Errorf("compactURL(%q) = %q; want %q", in, got, want)
		}
	}
}
