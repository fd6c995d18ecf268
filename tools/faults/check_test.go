package faults

import (
	"sort"
	"strings"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// The checkers must see the violations they exist for; a blind checker
// would make every fault scenario pass.
func TestCheckersSeeViolations(t *testing.T) {
	clean := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 1, Mono: 0, Expires: 100 * ms},
		{Worker: 1, Kind: EvRead, Token: 1, Mono: 1 * ms, Expires: 100 * ms},
		{Worker: 1, Kind: EvWrite, Token: 1, Mono: 2 * ms, Expires: 100 * ms, Value: 1},
		{Worker: 1, Kind: EvRelease, Token: 1, Mono: 3 * ms},
		{Worker: 2, Kind: EvAcquire, Token: 2, Mono: 4 * ms, Expires: 104 * ms},
		{Worker: 2, Kind: EvRead, Token: 2, Mono: 5 * ms, Expires: 104 * ms, Value: 1},
		{Worker: 2, Kind: EvWrite, Token: 2, Mono: 6 * ms, Expires: 104 * ms, Value: 2},
		{Worker: 2, Kind: EvRelease, Token: 2, Mono: 7 * ms},
	}, Final: 2, Healed: []int64{3 * ms}}
	for _, c := range []Check{CheckExclusion(clean), CheckLostUpdates(clean), CheckStaleTokens(clean),
		CheckMonotoneTokens(clean), CheckLossBeforeExpiry(clean), CheckLiveness(clean, 10*time.Millisecond)} {
		if !c.OK() {
			t.Errorf("%s on a clean history: %d violations: %s", c.Name, c.Violations, c.Detail)
		}
	}

	// Worker 1 pauses after reading past its validity, worker 2 takes over
	// and writes, worker 1 resumes and writes its stale value.
	stale := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 1, Mono: 0, Expires: 100 * ms},
		{Worker: 1, Kind: EvRead, Token: 1, Mono: 1 * ms, Expires: 100 * ms, Value: 0},
		{Worker: 2, Kind: EvAcquire, Token: 2, Mono: 150 * ms, Expires: 250 * ms},
		{Worker: 2, Kind: EvRead, Token: 2, Mono: 151 * ms, Expires: 250 * ms, Value: 0},
		{Worker: 2, Kind: EvWrite, Token: 2, Mono: 152 * ms, Expires: 250 * ms, Value: 1},
		{Worker: 2, Kind: EvRelease, Token: 2, Mono: 153 * ms},
		{Worker: 1, Kind: EvWrite, Token: 1, Mono: 300 * ms, Value: 1},
		{Worker: 1, Kind: EvLost, Token: 1, Mono: 301 * ms},
	}, Final: 1}
	want := map[string]Check{
		"stale-token":        CheckStaleTokens(stale),
		"lost-updates":       CheckLostUpdates(stale),
		"loss-before-expiry": CheckLossBeforeExpiry(stale),
	}
	for name, c := range want {
		if c.OK() {
			t.Errorf("%s missed the stale holder's write", name)
		}
	}
	if c := CheckExclusion(stale); !c.OK() {
		t.Errorf("exclusion flagged a takeover after the validity deadline: %s", c.Detail)
	}

	overlap := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 1, Mono: 0, Expires: 100 * ms},
		{Worker: 2, Kind: EvAcquire, Token: 2, Mono: 50 * ms, Expires: 150 * ms},
		{Worker: 1, Kind: EvRelease, Token: 1, Mono: 60 * ms},
		{Worker: 2, Kind: EvRelease, Token: 2, Mono: 70 * ms},
	}}
	if c := CheckExclusion(overlap); c.OK() {
		t.Error("exclusion missed two holders inside their validity windows")
	}

	// A renewal extends the window: acting past the first deadline is fine.
	renewed := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 1, Mono: 0, Expires: 100 * ms},
		{Worker: 1, Kind: EvRead, Token: 1, Mono: 90 * ms, Expires: 190 * ms},
		{Worker: 2, Kind: EvAcquire, Token: 2, Mono: 150 * ms, Expires: 250 * ms},
	}}
	if c := CheckExclusion(renewed); c.OK() {
		t.Error("exclusion ignored a renewed window")
	}

	backwards := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Token: 5, Mono: 0, Expires: 10 * ms},
		{Worker: 2, Kind: EvAcquire, Token: 3, Mono: 20 * ms, Expires: 30 * ms},
	}}
	if c := CheckMonotoneTokens(backwards); c.OK() {
		t.Error("monotone-tokens missed a token going back")
	}
	if c := CheckLiveness(History{Events: backwards.Events, Healed: []int64{25 * ms}}, 10*time.Millisecond); c.OK() {
		t.Error("liveness passed with no acquisition after the heal")
	}
}

// CheckPermits counts holders inside their validity windows: two of two
// permits pass, a third holder inside both windows is a violation, a
// holder whose window ended before the next began (a paused holder) is
// not; PermitChecks judges each permit's own tokens.
func TestCheckPermits(t *testing.T) {
	two := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Key: "p0", Token: 1, Mono: 0, Expires: 100 * ms},
		{Worker: 2, Kind: EvAcquire, Key: "p1", Token: 1, Mono: 1 * ms, Expires: 101 * ms},
		{Worker: 1, Kind: EvRelease, Key: "p0", Token: 1, Mono: 50 * ms},
		{Worker: 3, Kind: EvAcquire, Key: "p0", Token: 2, Mono: 50 * ms, Expires: 150 * ms},
		{Worker: 2, Kind: EvRelease, Key: "p1", Token: 1, Mono: 60 * ms},
		{Worker: 3, Kind: EvRelease, Key: "p0", Token: 2, Mono: 70 * ms},
	}}
	if c := CheckPermits(two, 2); !c.OK() {
		t.Errorf("two holders of two permits: %s", c.Detail)
	}
	if c := CheckPermits(two, 1); c.OK() {
		t.Errorf("two holders at once of one permit: not seen (%s)", c.Detail)
	}
	three := two
	three.Events = append(append([]Event(nil), two.Events...),
		Event{Worker: 4, Kind: EvAcquire, Key: "p2", Token: 1, Mono: 10 * ms, Expires: 110 * ms},
		Event{Worker: 4, Kind: EvRelease, Key: "p2", Token: 1, Mono: 20 * ms})
	if c := CheckPermits(three, 2); c.OK() {
		t.Errorf("three holders at once of two permits: not seen (%s)", c.Detail)
	}
	paused := History{Events: []Event{
		{Worker: 1, Kind: EvAcquire, Key: "p0", Token: 1, Mono: 0, Expires: 100 * ms},
		{Worker: 2, Kind: EvAcquire, Key: "p1", Token: 1, Mono: 1 * ms, Expires: 300 * ms},
		{Worker: 3, Kind: EvAcquire, Key: "p0", Token: 2, Mono: 150 * ms, Expires: 250 * ms},
		{Worker: 3, Kind: EvWrite, Key: "p0", Token: 2, Mono: 160 * ms, Value: 1},
		{Worker: 1, Kind: EvWrite, Key: "p0", Token: 1, Mono: 200 * ms, Value: 1},
		{Worker: 1, Kind: EvLost, Key: "p0", Token: 1, Mono: 201 * ms},
	}}
	if c := CheckPermits(paused, 2); !c.OK() {
		t.Errorf("a paused holder past its window beside two holders: %s", c.Detail)
	}
	if c := PermitChecks(paused, CheckStaleTokens); c.OK() || c.Name != "permit-stale-token" {
		t.Errorf("a stale write on a permit: %s %+v; want permit-stale-token violated", c.Name, c)
	}
	if c := PermitChecks(paused, CheckMonotoneTokens); !c.OK() {
		t.Errorf("tokens per permit: %s (each permit's own increase)", c.Detail)
	}
}

// The report's rows go by scenario number and letter, whichever lane
// finished first.
func TestScenarioRankOrdersRows(t *testing.T) {
	got := []string{"16 semaphore", "5b slow", "13 cluster", "5 client", "6c pg", "6 redis", "6b snap", "1 baseline", "7a two", "10 consul"}
	sort.SliceStable(got, func(i, j int) bool { return scenarioRank(got[i]) < scenarioRank(got[j]) })
	want := []string{"1 baseline", "5 client", "5b slow", "6 redis", "6b snap", "6c pg", "7a two", "10 consul", "13 cluster", "16 semaphore"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("rows in order %q; want %q", got, want)
	}
}

// done-before-lease-end sees a Done that closed after its deadline plus
// the drift allowance, and a hold that never reported its loss; a Done
// closed inside the drift allowance is on time.
func TestCheckDoneBeforeLeaseEnd(t *testing.T) {
	ttl := int64(4 * time.Second)
	drift := int64(40*time.Millisecond + 2*time.Millisecond) // driver.DriftAllowance(4s)
	acquire := func(key string) Event {
		return Event{Worker: 0, Kind: EvAcquire, Key: key, Token: 1, Mono: 0, Expires: 1000 * ms, TTL: ttl}
	}
	lost := func(key string, at int64) Event {
		return Event{Worker: 0, Kind: EvLost, Key: key, Token: 1, Mono: at, Expires: 1000 * ms, TTL: ttl}
	}
	onTime := History{Events: []Event{acquire("a"), acquire("b"), lost("a", 900*ms), lost("b", 1000*ms+drift-1)}}
	if c := CheckDoneBeforeLeaseEnd(onTime, 0); !c.OK() {
		t.Errorf("on time: %d violations: %s", c.Violations, c.Detail)
	}
	late := History{Events: []Event{acquire("a"), acquire("b"), lost("a", 900*ms), lost("b", 1000*ms+drift+1)}}
	if c := CheckDoneBeforeLeaseEnd(late, 0); c.Violations != 1 || !strings.Contains(c.Detail, "b (TTL 4s)") {
		t.Errorf("late: %d violations: %s; want 1, on b", c.Violations, c.Detail)
	}
	missing := History{Events: []Event{acquire("a"), acquire("b"), lost("a", 900*ms)}}
	if c := CheckDoneBeforeLeaseEnd(missing, 0); c.Violations != 1 {
		t.Errorf("missing: %d violations: %s; want 1", c.Violations, c.Detail)
	}
	if c := CheckDoneBeforeLeaseEnd(History{Events: []Event{acquire("a")}}, 1); c.OK() {
		t.Errorf("no hold of worker 1 lost: the check passed: %s", c.Detail)
	}
}
