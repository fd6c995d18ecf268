package redlock

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redislua"
)

// While an acquire's phase 2 has not written the token back, the holder's
// counters disagree: the first majority to grant has 10, 20 and 30 (token
// 30), two masters that granted later have 40 and 50. Inspect must not
// report a token above the holder's: an Election observer that saw 50
// would then never take the leader's real term, 30, for a new leader's;
// nor, while the release runs, a token above the one the holder had.
func TestMajorityInfoDuringPhase2(t *testing.T) {
	var rs []redislua.InspectReply
	counters := map[uint64]int{}
	for _, c := range []uint64{40, 10, 50, 30, 20} {
		rs = append(rs, redislua.InspectReply{Held: true, Counter: c, Remaining: time.Second, Owner: "o", Meta: "m"})
		counters[c]++
	}
	info := majorityInfo(rs, counters, 3)
	if !info.Held || info.Token == 0 || info.Token > 30 {
		t.Fatalf("majorityInfo during phase 2: %+v; want held with a token of at most 30 (never above the holder's)", info)
	}
	// While its release runs: the first majority had 10, 20 and 30 (token
	// 30; 10 and 20 stayed behind, as a majority held 30), two late
	// masters 40 and 50. The masters with 10 and 30 have released and
	// another client's refused attempt raised their counters to 60 and
	// 70; the holder keeps 20, 40 and 50, still a majority.
	rs, counters = rs[:0], map[uint64]int{60: 1, 70: 1}
	for _, c := range []uint64{20, 40, 50} {
		rs = append(rs, redislua.InspectReply{Held: true, Counter: c, Remaining: time.Second, Owner: "o"})
		counters[c]++
	}
	if info := majorityInfo(rs, counters, 3); info.Token > 30 {
		t.Fatalf("majorityInfo while the release runs: %+v; want a token of at most 30", info)
	}
	// After phase 2 the token is on a majority.
	rs, counters = rs[:0], map[uint64]int{}
	for _, c := range []uint64{40, 30, 50, 30, 30} {
		rs = append(rs, redislua.InspectReply{Held: true, Counter: c, Remaining: time.Second, Owner: "o"})
		counters[c]++
	}
	if info := majorityInfo(rs, counters, 3); info.Token != 30 {
		t.Fatalf("majorityInfo after phase 2: %+v; want token 30", info)
	}
}
