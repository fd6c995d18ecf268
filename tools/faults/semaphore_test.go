package faults

import (
	"strings"
	"testing"
	"time"
)

// permitsRun is the number of permits of the semaphore scenario; it runs
// two more workers than that.
const permitsRun = 2

// Scenario 14: a semaphore permit holder paused past its lease, then
// resumed. Its permit goes to a waiter; never more than N act inside
// their validity windows; with fencing (per permit) the paused holder's
// stale write is rejected, without it (canary) it is seen. As in 2, a
// paused holder learns of its loss only when it resumes, after its
// deadline: loss-before-expiry is not judged.
func semaphorePaused(t *testing.T, b Backend) {
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: permitsRun + 2, Fenced: fenced, Permits: permitsRun,
			Hold: victimHold(100 * time.Millisecond), SelfStop: true})
		victim := r.WaitFor(time.Minute, "the victim's read", isRead(0))
		if !strings.Contains(victim.Key, "#permit/") {
			t.Fatalf("the victim's read names no permit: %+v", victim)
		}
		r.WaitStopped(0)
		r.WaitFor(b.TTL+b.Grace+time.Minute, "a write on the victim's permit by its next holder", func(e Event) bool {
			return e.Kind == EvWrite && e.Worker != victim.Worker && e.Key == victim.Key && e.Token > victim.Token
		})
		r.Resume(0)
		r.WaitFor(30*time.Second, "the victim's stale step", staleStep(victim))
		h := r.Stop()
		permits := CheckPermits(h, permitsRun)
		if fenced {
			judge(t, "16 semaphore permit holder paused past its lease (fenced)", b, h, expect{
				extra: []Check{permits, PermitChecks(h, CheckExclusion), PermitChecks(h, CheckLostUpdates),
					PermitChecks(h, CheckStaleTokens), PermitChecks(h, CheckMonotoneTokens)},
			})
			if !rejected(h, victim) {
				t.Errorf("%s: the paused permit holder's stale write was not rejected", b.Name)
			}
		} else {
			judge(t, "16 semaphore permit holder paused past its lease (unfenced)", b, h, expect{
				extra:       []Check{permits, PermitChecks(h, CheckExclusion), PermitChecks(h, CheckMonotoneTokens)},
				canaryExtra: []Check{PermitChecks(h, CheckStaleTokens), PermitChecks(h, CheckLostUpdates)},
			})
		}
	}
}
