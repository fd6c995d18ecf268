package benchpeers

import (
	"fmt"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Goals 4 and 5: the count of holds, the short TTL of goal 4, and goal
// 5's limits per hold.
const (
	goalHolds         = 100000
	goalShortTTL      = "3s"
	maxGoroutinesHold = 0.01
	maxHeapHold       = 2048
)

// ttlOf is the lease a many-holds row ran with.
func ttlOf(r *Result) time.Duration {
	if r.TTL == "default" {
		return dlock.DefaultTTL
	}
	first, _, _ := strings.Cut(r.TTL, " ")
	d, err := time.ParseDuration(first)
	if err != nil {
		return 0
	}
	return d
}

// renewalUnit says what one renewal costs on a system's store.
func renewalUnit(sys string) string {
	switch sys {
	case sysRedlock:
		return ", each a check-and-extend on each of 5 servers"
	case sysFile:
		return ", each seven system calls on the key's file (open, flock, fstat, a stat of its name, a read of its head, " +
			"a write of its expires digits, close), none of which can be shared between holds"
	default:
		return ""
	}
}

// holdsShort says why a many-holds row lost holds or did not take them
// all, from its own figures: the renewals the holds need.
func holdsShort(r *Result, cores string) string {
	if r.Lost == 0 && r.Held >= r.Holds {
		return ""
	}
	ttl := ttlOf(r)
	if ttl <= 0 {
		return ""
	}
	need := fmt.Sprintf("%d holds at a %v TTL need %.0f renewals a second (each once per TTL/3)%s", r.Holds, ttl,
		float64(r.Holds)/driver.RenewInterval(ttl).Seconds(), renewalUnit(r.System))
	if r.Lost == 0 {
		return fmt.Sprintf("%s; with the client and the servers on %s cores that is more than they can do: the renewals of "+
			"the %d holds already taken went first and none was lost, and the next acquisition failed (the error column) "+
			"because the servers could no longer answer it in time.", need, cores, r.Held)
	}
	w := fmt.Sprintf("%s; with the client and the servers on %s cores they fell behind, and %d holds ran out of lease", need, cores, r.Lost)
	switch {
	case r.LostAcquiring == r.Lost:
		w += " while acquiring went on."
	case r.LostAcquiring > 0:
		w += fmt.Sprintf(", %d of them while acquiring went on.", r.LostAcquiring)
	default:
		w += ", all after acquiring ended."
	}
	if r.Held < r.Holds {
		w += fmt.Sprintf(" Acquiring stopped at %d of %d: the next acquisition failed (the error column) because the "+
			"servers could no longer answer it in time.", r.Held, r.Holds)
	}
	return w + heldCores(r, cores)
}

// heldCores says how much of the machine renewing the holds took once all
// were held: this process's CPU, and the Redis servers' where measured.
func heldCores(r *Result, cores string) string {
	switch {
	case r.HeldClientCores == nil:
		return ""
	case r.HeldServerCores == nil:
		return fmt.Sprintf(" Once all were held, keeping them took %.2f of the %s cores in this process alone (system calls included).",
			*r.HeldClientCores, cores)
	}
	return fmt.Sprintf(" Once all were held, keeping them took %.2f of the %s cores: %.2f in this process and %.2f in the "+
		"servers' main threads.", *r.HeldClientCores+*r.HeldServerCores, cores, *r.HeldClientCores, *r.HeldServerCores)
}

// redlockHolds checks goal 4: Redlock takes and keeps 100,000 holds at a
// 3 s TTL without losing one (a run that stopped acquiring short of them
// lost none of the fewer it kept, and does not meet it).
func redlockHolds(gs *goals, run goalRun) {
	what := fmt.Sprintf("4 Redlock, %d holds at a %s TTL: all held, none lost", goalHolds, goalShortTTL)
	r := find(run.rs, ScenManyHolds, sysRedlock, 0, goalShortTTL)
	switch {
	case r == nil || r.Held == 0:
		gs.add(what, "n/a", false, false, "")
	case r.Holds < goalHolds:
		gs.add(what, fmt.Sprintf("n/a: %d holds run", r.Holds), false, false, "")
	default:
		gs.add(what, fmt.Sprintf("%d lost of %d held (of %d)", r.Lost, r.Held, r.Holds), r.Lost == 0 && r.Held == r.Holds, true,
			holdsShort(r, run.cores))
	}
}

// manyHolds checks goal 5 on every many-holds row, and says n/a for a
// dlock backend the run did not hold many locks on.
func manyHolds(gs *goals, run goalRun) {
	limits := fmt.Sprintf("<= %g goroutines and <= %d KB heap per hold, none lost, all held", maxGoroutinesHold, maxHeapHold/1024)
	for _, c := range contenders {
		if find(run.rs, ScenManyHolds, c.sys, 0, "") == nil {
			gs.add(fmt.Sprintf("5 %d holds, %s: %s", goalHolds, c.sys, limits), "n/a", false, false, "")
			continue
		}
		for i := range run.rs {
			if r := &run.rs[i]; r.Scenario == ScenManyHolds && r.System == c.sys {
				holdsRow(gs, run, r, limits)
			}
		}
	}
}

// holdsRow checks goal 5 on one many-holds row.
func holdsRow(gs *goals, run goalRun, r *Result, limits string) {
	what := fmt.Sprintf("5 %d holds, TTL %s, %s: %s", goalHolds, r.TTL, r.System, limits)
	if r.Held == 0 || r.Holds < goalHolds {
		gs.add(what, fmt.Sprintf("n/a: %d/%d held", r.Held, r.Holds), false, false, "")
		return
	}
	ok := r.GoroutinesPerHold <= maxGoroutinesHold && r.HeapPerHold <= maxHeapHold && r.Lost == 0 && r.Held == r.Holds
	var why []string
	if w := holdsShort(r, run.cores); w != "" {
		why = append(why, w)
	}
	if r.GoroutinesPerHold > maxGoroutinesHold {
		why = append(why, fmt.Sprintf("%.0f goroutines for the whole Locker, a fixed number that more holds spread thinner.",
			r.GoroutinesPerHold*float64(r.Holds)))
	}
	if r.HeapPerHold > maxHeapHold {
		w := "The heap per hold is over the limit."
		if def := find(run.rs, ScenManyHolds, r.System, 0, "default"); def != nil && def != r && def.Held > 0 {
			w = fmt.Sprintf("The heap is measured while all are held, renewals in flight included: at the default TTL the same "+
				"holds cost %.0f B each; at a %v TTL every hold is renewed every %v.", def.HeapPerHold, ttlOf(r), driver.RenewInterval(ttlOf(r)))
		}
		why = append(why, w)
	}
	gs.add(what, fmt.Sprintf("%d/%d held, %.3f goroutines, %.0f B, %d lost", r.Held, r.Holds, r.GoroutinesPerHold, r.HeapPerHold, r.Lost),
		ok, true, strings.Join(why, " "))
}
