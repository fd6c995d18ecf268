package redis

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// uncontendedCommands is the most server commands (INFO commandstats,
// the scripts' inner commands included) an uncontended Lock+Unlock may
// cost: the acquire script and its LINDEX of the queue, SET NX PX of the
// lock, TIME and GET of the counter, and one MSET of the counter and the
// holder's description; the release script and its GET of the lock,
// LINDEX of the queue, DEL and PUBLISH (for Watch). The bare SET NX PX
// lock with a Lua compare-and-delete costs 4.
const uncontendedCommands = 11

// An uncontended Lock+Unlock costs the server no more commands than
// uncontendedCommands: each command inside a script is paid for (see
// doc.go, Benchmarks), so a step added to the common path shows here.
// Counted on a server of this test's own, so that no other client's
// commands are counted; not timed.
func TestUncontendedCommands(t *testing.T) {
	srv := startTempServer(t)
	admin := srv.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := openMutex(ctx, t, srv.url()+"?prefix=cost", "uncontended/"+randomHex(6), dlock.WithTTL(30*time.Second))
	cycle := func() {
		t.Helper()
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	cycle() // loads the scripts (EVALSHA, NOSCRIPT, EVAL)
	const rounds = 50
	before := commandStats(t, admin)
	for i := 0; i < rounds; i++ {
		cycle()
	}
	after := commandStats(t, admin)
	var total int64
	var per []string
	for cmd, n := range after {
		if cmd == "info" {
			continue
		}
		if d := n - before[cmd]; d > 0 {
			total += d
			per = append(per, fmt.Sprintf("%s %.2f", cmd, float64(d)/rounds))
		}
	}
	sort.Strings(per)
	got := float64(total) / rounds
	t.Logf("uncontended Lock+Unlock: %.2f commands (%s)", got, strings.Join(per, ", "))
	if got > uncontendedCommands {
		t.Errorf("uncontended Lock+Unlock: %.2f server commands (%s); want at most %d", got, strings.Join(per, ", "), uncontendedCommands)
	}
}
