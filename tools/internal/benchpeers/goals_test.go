package benchpeers

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// A target not met carries its reason with the figures of the run; a met
// one carries none.
func TestGoalsSayWhyNotMet(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []Result{
		{Scenario: ScenContended, System: sysRedis, Lockers: 8, AcqPerSec: 500, WaitP99: 20, HandoffP99: f(0.8),
			FairMax: 100, FairMin: 99, CmdsPerAcq: f(23), CPUPerAcq: f(200), RTPerAcq: f(2)},
		{Scenario: ScenContended, System: sysBare, Lockers: 8, AcqPerSec: 600, WaitP99: 200, HandoffP99: f(9),
			FairMax: 200, FairMin: 50, CmdsPerAcq: f(5), CPUPerAcq: f(150), RTPerAcq: f(3)},
		{Scenario: ScenUncontended, System: sysEtcd, AcqPerSec: 400, CmdsPerAcq: f(2)},
		{Scenario: ScenContended, System: sysEtcd, Lockers: 8, AcqPerSec: 200},
		{Scenario: ScenContended, System: sysEtcdMutex, Lockers: 8, AcqPerSec: 80},
		{Scenario: ScenManyHolds, System: "dlock file://", TTL: "3s", Holds: 1000, Held: 1000, Lost: 7, HeapPerHold: 900},
		{Scenario: ScenManyHolds, System: sysRedlock, TTL: "3s", Holds: 1000, Held: 800, Lost: 9, HeapPerHold: 900},
		{Scenario: ScenManyHolds, System: sysRedis, TTL: "default", Holds: 1000, Held: 1000, HeapPerHold: 1500},
		{Scenario: ScenManyHolds, System: sysRedis, TTL: "3s", Holds: 1000, Held: 1000, HeapPerHold: 2100},
	}
	var buf bytes.Buffer
	writeGoals(&buf, Meta{Machine: map[string]string{"nproc": "2"}, Config: Config{Hold: time.Millisecond, Lockers: []int{8}}}, rs)
	md := buf.String()
	row := func(prefix string) string {
		for _, l := range strings.Split(md, "\n") {
			if strings.HasPrefix(l, "| "+prefix) {
				return l
			}
		}
		t.Fatalf("no row %q in\n%s", prefix, md)
		return ""
	}
	for prefix, want := range map[string][]string{
		"1 Redis x8: acq/s":                         {"0.83x", "**not met**", "2.00 ms here against 1.67 ms", "on 2 cores"},
		"1 Redis x8: wait p99":                      {"**not met**", "8 x the measured cycle 2.00 ms + 5 ms = 21.0 ms", "within that"},
		"3 etcd contended x8":                       {"2.50x", "**not met**", "5x concurrency.Mutex is 400", "did 400/s", "reaches 50% of that"},
		"4 many holds 1000, TTL 3s, dlock file://":  {"7 lost", "**not met**", "1000 renewals a second", "7 holds ran out of lease"},
		"4 many holds 1000, TTL 3s, " + sysRedlock:  {"800/1000 held", "9 lost", "**not met**", "9 holds ran out of lease. Acquiring stopped at 800 of 1000"},
		"4 many holds 1000, TTL 3s, dlock redis://": {"2100 B", "**not met**", "at the default TTL the same holds cost 1500 B", "renewed every 1s"},
	} {
		l := row(prefix)
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("row %q lacks %q:\n%s", prefix, w, l)
			}
		}
	}
	for _, prefix := range []string{"1 Redis x8: handoff p99", "1 Redis x8: fairness", "4 many holds 1000, TTL default"} {
		if l := row(prefix); !strings.HasSuffix(l, "| met |  |") {
			t.Errorf("a met target with a reason or not met:\n%s", l)
		}
	}
}

// With a paired result, the uncontended goal is decided by the median of
// its blocks' ratios, not by the separate runs' ratio.
func TestPairedRatioDecidesUncontended(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []Result{
		{Scenario: ScenUncontended, System: sysEtcd, AcqPerSec: 600, CmdsPerAcq: f(2)},
		{Scenario: ScenUncontended, System: sysEtcdMutex, AcqPerSec: 700, CmdsPerAcq: f(2)},
		{Scenario: ScenPaired, System: sysEtcd, Peer: sysEtcdMutex, AcqPerSec: 690, PeerAcqPerSec: 680,
			BlockRatios: []float64{0.90, 1.01, 1.02, 1.03, 1.10}},
		{Scenario: ScenUncontended, System: sysZK, AcqPerSec: 700, CmdsPerAcq: f(4)},
		{Scenario: ScenUncontended, System: sysZKLock, AcqPerSec: 650, CmdsPerAcq: f(3)},
		{Scenario: ScenPaired, System: sysZK, Peer: sysZKLock, AcqPerSec: 640, PeerAcqPerSec: 660,
			BlockRatios: []float64{0.95, 0.97, 0.99}},
	}
	if med, lo, hi := pairedRatio(&rs[2]); med != 1.02 || lo != 1.01 || hi != 1.03 {
		t.Errorf("paired ratio %v (quartiles %v-%v), want 1.02 (1.01-1.03)", med, lo, hi)
	}
	var buf bytes.Buffer
	writeGoals(&buf, Meta{Machine: map[string]string{"nproc": "2"}, Config: Config{Hold: time.Millisecond, Lockers: []int{8}}}, rs)
	md := buf.String()
	for prefix, want := range map[string][]string{
		"3 uncontended: etcd":      {"1.02x paired (quartiles 1.01-1.03); 0.86x in separate runs", "| met |"},
		"3 uncontended: ZooKeeper": {"0.97x paired (quartiles 0.96-0.98); 1.08x in separate runs", "**not met**", "4.0 packets"},
	} {
		var l string
		for _, line := range strings.Split(md, "\n") {
			if strings.HasPrefix(line, "| "+prefix) {
				l = line
			}
		}
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("row %q lacks %q:\n%s", prefix, w, md)
			}
		}
	}
}

// With the fenced reference lock in the run, the reason for the Redis
// uncontended target splits the gap: the token alone (the fenced lock
// against the bare one) and dlock's work beyond it (dlock against the
// fenced lock), both paired; without it, the reason stays the counts.
func TestRedisUncontendedReasonSplitsTheGap(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	base := []Result{
		{Scenario: ScenUncontended, System: sysRedis, AcqPerSec: 6000, CmdsPerAcq: f(13), UsecPerAcq: f(28), RTPerAcq: f(2)},
		{Scenario: ScenUncontended, System: sysBare, AcqPerSec: 8500, CmdsPerAcq: f(4), UsecPerAcq: f(4.5), RTPerAcq: f(2)},
		{Scenario: ScenPaired, System: sysRedis, Peer: sysBare, AcqPerSec: 6000, PeerAcqPerSec: 8000,
			BlockRatios: []float64{0.70, 0.72, 0.75}},
	}
	fenced := []Result{
		{Scenario: ScenUncontended, System: sysFenced, AcqPerSec: 8200, CmdsPerAcq: f(6), UsecPerAcq: f(8.5), RTPerAcq: f(2)},
		{Scenario: ScenPaired, System: sysFenced, Peer: sysBare, AcqPerSec: 8000, PeerAcqPerSec: 8300,
			BlockRatios: []float64{0.94, 0.96, 0.97}},
		{Scenario: ScenPaired, System: sysRedis, Peer: sysFenced, AcqPerSec: 6000, PeerAcqPerSec: 7900,
			BlockRatios: []float64{0.74, 0.76, 0.80}},
	}
	row := func(rs []Result) string {
		var buf bytes.Buffer
		writeGoals(&buf, Meta{Machine: map[string]string{"nproc": "2"}, Config: Config{Hold: time.Millisecond, Lockers: []int{8}}}, rs)
		for _, line := range strings.Split(buf.String(), "\n") {
			if strings.HasPrefix(line, "| 3 uncontended: Redis ") {
				return line
			}
		}
		t.Fatalf("no Redis uncontended row:\n%s", buf.String())
		return ""
	}
	with := row(append(slices.Clone(base), fenced...))
	for _, w := range []string{"0.72x paired (quartiles 0.71-0.73)", "**not met**", "ran at 0.96x the bare lock, paired (quartiles 0.95-0.96)",
		"dlock ran at 0.76x that lock, paired (quartiles 0.75-0.78)", "13.0 server commands per Lock+Unlock against 6.0 (bare: 4.0)"} {
		if !strings.Contains(with, w) {
			t.Errorf("with the fenced lock, the row lacks %q:\n%s", w, with)
		}
	}
	if without := row(base); strings.Contains(without, "fenced") || !strings.Contains(without, "13.0 server commands per Lock+Unlock against 4.0") {
		t.Errorf("without the fenced lock, the row should give the counts against the bare lock only:\n%s", without)
	}
}

// The JSON of a run (benchpeers -json) keeps what the report needs, so
// that -render writes the same report from it, and no endpoint.
func TestMetaJSONRoundTrip(t *testing.T) {
	cfg := Config{Endpoints: Endpoints{Redis: "redis://:secret@127.0.0.1:6379"}, Reps: 3, Duration: 2 * time.Second,
		Lockers: []int{2, 8}, Hold: time.Millisecond, Holds: 10, HoldTTLs: []time.Duration{0, 3 * time.Second}}
	meta := Meta{Command: "c", Started: time.Unix(1, 0).UTC(), Finished: time.Unix(2, 0).UTC(),
		Machine: map[string]string{"nproc": "2"}, Config: cfg}
	rs := []Result{{Scenario: ScenContended, System: sysRedis, Lockers: 8, AcqPerSec: 500, WaitP99: 20}}
	b, err := json.Marshal(meta)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("secret")) {
		t.Fatalf("the JSON carries an endpoint: %s", b)
	}
	var back Meta
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var a, c bytes.Buffer
	WriteMarkdown(&a, meta, rs)
	WriteMarkdown(&c, back, rs)
	if a.String() != c.String() {
		t.Fatalf("the report from the JSON differs:\n%s\n---\n%s", a.String(), c.String())
	}
}
