package redlock

import (
	"strconv"
	"testing"
	"time"
)

// The members whose wait ended are kept in a bounded set: the oldest go
// first, and with them those whose time is up; one remembered again is
// kept from its latest remember, and the record of its first does not
// drop it. The order stays within twice the bound however the set is
// used.
func TestRememberKeepsTheNewestEndedMembers(t *testing.T) {
	d := &Driver{ended: map[string]endedMember{}}
	later := time.Now().Add(time.Hour)
	for i := range maxEnded + 10 {
		d.remember(strconv.Itoa(i), endedMember{key: "k", until: later})
	}
	if len(d.ended) != maxEnded {
		t.Fatalf("%d members kept; want %d", len(d.ended), maxEnded)
	}
	for i := range 10 {
		if _, ok := d.ended[strconv.Itoa(i)]; ok {
			t.Fatalf("member %d, among the oldest, is still kept", i)
		}
	}
	if _, ok := d.ended[strconv.Itoa(maxEnded+9)]; !ok {
		t.Fatal("the newest member was not kept")
	}

	// Remembered again: the old record in the order must not drop it
	// when that record comes up.
	again := strconv.Itoa(10) // the oldest kept
	d.remember(again, endedMember{key: "k2", until: later})
	for i := range maxEnded - 1 {
		d.remember("new"+strconv.Itoa(i), endedMember{key: "k", until: later})
	}
	if e, ok := d.ended[again]; !ok || e.key != "k2" {
		t.Fatalf("a member remembered again was dropped with its first record (kept: %v)", ok)
	}

	// Run out: dropped by the next remember, whatever the room.
	d = &Driver{ended: map[string]endedMember{}}
	d.remember("gone", endedMember{until: time.Now().Add(-time.Second)})
	d.remember("live", endedMember{until: later})
	if _, ok := d.ended["gone"]; ok {
		t.Fatal("a member whose time is up was kept")
	}

	// The same member over and over, behind a live oldest one.
	d.remember("first", endedMember{until: later})
	for range 10 * maxEnded {
		d.remember("same", endedMember{until: later})
	}
	if n := len(d.endedOrder); n > 2*maxEnded {
		t.Fatalf("the order holds %d records for %d members; want at most %d", n, len(d.ended), 2*maxEnded)
	}
	if _, ok := d.ended["first"]; !ok {
		t.Fatal("compacting the order dropped a live member")
	}
}
