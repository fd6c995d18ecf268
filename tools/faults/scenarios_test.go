package faults

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/launcher"
)

// Scenario 1: no faults; every check passes, with and without fencing.
func baseline(t *testing.T, b Backend) {
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: 4, Fenced: fenced})
		r.WaitFor(time.Minute, "20 writes", countWrites(20))
		judge(t, "1 baseline"+fencedLabel(fenced), b, r.Stop(), expect{must: allChecks})
	}
}

func fencedLabel(fenced bool) string {
	if fenced {
		return " (fenced)"
	}
	return " (unfenced)"
}

// countWrites matches the n-th accepted write.
func countWrites(n int) func(Event) bool {
	seen := 0
	return func(e Event) bool {
		if e.Kind == EvWrite {
			seen++
		}
		return seen >= n
	}
}

func isRead(worker int) func(Event) bool {
	return func(e Event) bool { return e.Kind == EvRead && e.Worker == worker }
}

// writeAfter matches an accepted write by another worker with a higher token.
func writeAfter(victim Event) func(Event) bool {
	return func(e Event) bool { return e.Kind == EvWrite && e.Worker != victim.Worker && e.Token > victim.Token }
}

// staleStep matches the victim's own write or rejection after it resumes.
func staleStep(victim Event) func(Event) bool {
	return func(e Event) bool {
		return e.Worker == victim.Worker && e.Token == victim.Token && (e.Kind == EvWrite || e.Kind == EvReject)
	}
}

// rejected reports whether the victim's stale operation was rejected.
func rejected(h History, victim Event) bool {
	for _, e := range h.Events {
		if e.Kind == EvReject && e.Worker == victim.Worker && e.Token == victim.Token {
			return true
		}
	}
	return false
}

func lostReported(h History, victim Event) bool {
	for _, e := range h.Events {
		if e.Kind == EvLost && e.Worker == victim.Worker && e.Token == victim.Token {
			return true
		}
	}
	return false
}

// Scenario 2: a holder paused past its lease, then resumed. Without fencing
// its stale write must be seen (canary); with fencing it must be rejected.
func pausePastLease(t *testing.T, b Backend) {
	pausedPastLease(t, b, "2 holder paused past its lease", false)
}

// Scenario 14: as 2, with the workers candidates of an election: the
// leader is paused past its lease, another candidate is elected, and the
// resumed leader's write with its old term must be refused by the fence
// (seen, without fencing).
func leaderPausedPastLease(t *testing.T, b Backend) {
	pausedPastLease(t, b, "14 leader paused past its lease", true)
}

func pausedPastLease(t *testing.T, b Backend, label string, elect bool) {
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: 3, Fenced: fenced, Hold: victimHold(100 * time.Millisecond), SelfStop: true, Elect: elect})
		victim := r.WaitFor(time.Minute, "the victim's read", isRead(0))
		r.WaitStopped(0)
		r.WaitFor(b.TTL+b.Grace+time.Minute, "a write by the next holder", writeAfter(victim))
		r.Resume(0)
		r.WaitFor(30*time.Second, "the victim's stale step", staleStep(victim))
		h := r.Stop()
		if fenced {
			judge(t, label+" (fenced)", b, h,
				expect{must: []string{"exclusion", "lost-updates", "stale-token", "monotone-tokens"}})
			if !rejected(h, victim) {
				t.Errorf("%s: the paused holder's stale write was not rejected", b.Name)
			}
		} else {
			judge(t, label+" (unfenced)", b, h,
				expect{must: []string{"exclusion", "monotone-tokens"}, canary: []string{"stale-token", "lost-updates"}})
		}
	}
}

func victimHold(d time.Duration) func(int) time.Duration {
	return func(i int) time.Duration {
		if i == 0 {
			return d
		}
		return 0
	}
}

// Scenario 3: a pause well under the lease costs nothing.
//
// The pause the victim gets is from its read (it stops itself right
// after) to the SIGCONT: TTL/5 and the time this process takes to see it
// stopped and signal it. On a machine busy enough to stretch that past
// half the lease the run is no sample of a short pause (a stop past the
// lease is scenario 2), so it is run again, at most twice; three such runs
// fail the test.
func shortPause(t *testing.T, b Backend) {
	const attempts = 3
	for attempt := 1; ; attempt++ {
		r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Hold: victimHold(100 * time.Millisecond), SelfStop: true})
		victim := r.WaitFor(time.Minute, "the victim's read", isRead(0))
		r.WaitStopped(0)
		time.Sleep(b.TTL / 5)
		r.Resume(0)
		if paused := time.Duration(Mono() - victim.Mono); paused > b.TTL/2 {
			r.Stop()
			if attempt == attempts {
				t.Fatalf("%s: in %d runs the victim could not be paused for less than half the lease (last: %v): no short pause was tested",
					b.Name, attempts, paused)
			}
			t.Logf("%s: run %d paused the victim for %v, not about TTL/5 (%v): the machine is too busy; again", b.Name, attempt, paused, b.TTL/5)
			continue
		}
		r.WaitFor(30*time.Second, "the victim's write", staleStep(victim))
		h := r.Stop()
		judge(t, "3 short pause", b, h, expect{must: allChecks})
		if lostReported(h, victim) || rejected(h, victim) {
			t.Errorf("%s: a pause of TTL/5 was taken for a loss", b.Name)
		}
		return
	}
}

// Scenario 4: the holder is killed; another worker acquires within the
// lease plus the liveness bound.
func holderKilled(t *testing.T, b Backend) { killed(t, b, "4 holder killed", false) }

// Scenario 15: as 4, with the workers candidates of an election: the
// leader is killed, another candidate leads within the lease plus the
// liveness bound, and terms keep increasing.
func leaderKilled(t *testing.T, b Backend) { killed(t, b, "15 leader killed", true) }

func killed(t *testing.T, b Backend, label string, elect bool) {
	r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Hold: victimHold(b.TTL), Elect: elect})
	r.WaitFor(time.Minute, "the victim's read", isRead(0))
	r.Kill(0)
	r.Healed()
	killed := Mono()
	r.WaitFor(b.TTL+b.Grace+b.Liveness+time.Minute, "an acquisition after the kill",
		func(e Event) bool { return e.Kind == EvAcquire && e.Mono > killed })
	time.Sleep(time.Second)
	judge(t, label, b, r.Stop(), expect{must: allChecks})
}

// Scenario 5 (and 9 on ZooKeeper): the holder is cut off from the lock
// servers for longer than its lease. Its Done must fire before its validity
// deadline; with fencing nothing is lost; locking goes on after the heal.
func clientPartition(t *testing.T, b Backend, name string, cut time.Duration) {
	px := NewProxies()
	defer px.Close()
	links := make([]*Link, 3)
	urls := make([]string, 3)
	for i := range urls {
		u, l, err := px.Rewrite(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		urls[i], links[i] = u, l
	}
	r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Hold: victimHold(cut + b.TTL),
		URL: func(i int) string { return urls[i] }})
	victim := r.WaitFor(time.Minute, "the victim's read", isRead(0))
	cutAt := time.Now()
	if err := links[0].Cut(); err != nil {
		t.Fatal(err)
	}
	r.WaitFor(cut+time.Minute, "a write by the next holder", writeAfter(victim))
	time.Sleep(time.Until(cutAt.Add(cut)))
	links[0].Heal()
	r.Healed()
	r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
	r.WaitFor(time.Minute, "the victim locking again",
		func(e Event) bool { return e.Kind == EvAcquire && e.Worker == 0 && e.Token > victim.Token })
	h := r.Stop()
	judge(t, name, b, h, expect{must: allChecks})
	if !lostReported(h, victim) {
		t.Errorf("%s: the partitioned holder never reported its loss", b.Name)
	}
	if !rejected(h, victim) {
		t.Errorf("%s: the partitioned holder's stale write was not rejected", b.Name)
	}
}

// Scenario 5b: every worker's links to the lock servers are slow (100 ms
// each way, +-20 ms) for the whole run. Renewals still arrive in time: all
// checks pass, and no hold is taken for lost.
func slowLinks(t *testing.T, b Backend) {
	px := NewProxies()
	defer px.Close()
	const workers = 3
	urls := make([]string, workers)
	for i := range urls {
		u, l, err := px.Rewrite(b.URL)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Slow(100*time.Millisecond, 20*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		urls[i] = u
	}
	r := Start(t, b, RunOptions{Workers: workers, Fenced: true, URL: func(i int) string { return urls[i] }})
	r.WaitFor(2*time.Minute, "10 writes", countWrites(10))
	h := r.Stop()
	judge(t, "5b client links slowed (100ms each way)", b, h, expect{must: allChecks})
	for _, e := range h.Events {
		if e.Kind == EvLost || e.Kind == EvReject {
			t.Errorf("%s: worker %d: %s (token %d) on a slow but working network", b.Name, e.Worker, e.Kind, e.Token)
		}
	}
}

// Server faults (scenarios 6-8) restart what they stop, even on failure.
func restartOnCleanup(t *testing.T, nodes ...string) {
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = launcher.Resume(ctx(t), n)
			_ = launcher.Start(ctx(t), n)
		}
	})
}

func kill(t *testing.T, nodes ...string) {
	restartOnCleanup(t, nodes...)
	for _, n := range nodes {
		if err := launcher.Kill(ctx(t), n); err != nil {
			t.Fatalf("kill %s: %v", n, err)
		}
	}
}

// start starts nodes again. A port the killed process held can take a
// moment to be free, so a failed start is retried for a few seconds.
func start(t *testing.T, nodes ...string) {
	for _, n := range nodes {
		var err error
		for try := 0; try < 20; try++ {
			if err = launcher.Start(ctx(t), n); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("start %s: %v", n, err)
		}
	}
}

// Scenario 6: Redis restarted without persistence while a lock is held. The
// lock is broken (exclusion is violated either way); without fencing the
// stale holder's write lands (canary), with fencing and the TIME-seeded
// counter it is rejected.
func redisRestart(t *testing.T, b Backend) {
	b.TTL = 3 * time.Second
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: 3, Fenced: fenced, Hold: victimHold(2 * time.Second)})
		victim := r.WaitFor(time.Minute, "the victim's read", isRead(0))
		kill(t, "redis")
		r.Healed()
		start(t, "redis")
		r.WaitFor(time.Minute, "a write by the next holder", writeAfter(victim))
		r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
		h := r.Stop()
		if fenced {
			judge(t, "6 Redis restarted empty during a hold (fenced)", b, h,
				expect{must: []string{"stale-token", "monotone-tokens", "lost-updates", "liveness"}, canary: []string{"exclusion"}})
		} else {
			judge(t, "6 Redis restarted empty during a hold (unfenced)", b, h,
				expect{must: []string{"monotone-tokens"}, canary: []string{"exclusion", "stale-token", "lost-updates"}})
		}
	}
}

// Scenario 6b: PostgreSQL killed (SIGKILL: a crash, not a shutdown) and
// started again while a lock is held. A committed lease is in the WAL, so
// crash recovery brings it back and its expiry ran on the server's clock
// meanwhile: nobody else acquires before it ends, and every check passes,
// fenced or not. The holder's renewals fail while the server is down
// (unavailable, retried); if it stays down past the validity window, the
// holder reports the loss before its lease can end.
func postgresRestart(t *testing.T, b Backend) {
	b.TTL = 3 * time.Second
	for _, fenced := range []bool{false, true} {
		r := Start(t, b, RunOptions{Workers: 3, Fenced: fenced, Hold: victimHold(2 * time.Second)})
		// Every worker must have opened its Locker before the kill (a
		// worker whose Open fails exits): wait until each has held the
		// lock once, then for a hold of the victim's after that.
		var opened int64
		for _, w := range []int{1, 2} {
			opened = max(opened, r.WaitFor(time.Minute, fmt.Sprintf("worker %d's first hold", w),
				func(e Event) bool { return e.Kind == EvAcquire && e.Worker == w }).Mono)
		}
		victim := r.WaitFor(time.Minute, "the victim's read", func(e Event) bool { return isRead(0)(e) && e.Mono > opened })
		kill(t, "postgres")
		start(t, "postgres")
		// Liveness counts from the server being back. A worker may acquire
		// between the server accepting connections and the launcher's
		// probe seeing it, before this mark, and the run must not stop
		// before an acquisition after the mark that the check can judge.
		r.Healed()
		healed := Mono()
		r.WaitFor(time.Minute, "the victim's step", staleStep(victim))
		r.WaitFor(time.Minute, "a write by the next holder", writeAfter(victim))
		r.WaitFor(time.Minute, "an acquisition after the heal", func(e Event) bool { return e.Kind == EvAcquire && e.Mono > healed })
		judge(t, "6c PostgreSQL killed and restarted during a hold"+fencedLabel(fenced), b, r.Stop(), expect{must: allChecks})
	}
}

// Scenario 7a: Redlock with 2 of 5 masters down works and stays correct.
func redlockMinorityDown(t *testing.T, b Backend) {
	kill(t, "redlock-4", "redlock-5")
	r := Start(t, b, RunOptions{Workers: 4, Fenced: true})
	r.WaitFor(time.Minute, "20 writes", countWrites(20))
	h := r.Stop()
	start(t, "redlock-4", "redlock-5")
	judge(t, "7a Redlock: 2 of 5 masters killed", b, h, expect{must: allChecks})
}

// Scenario 7b: with 3 of 5 down nobody acquires; after restart locking
// resumes.
func redlockMajorityDown(t *testing.T, b Backend) {
	r := Start(t, b, RunOptions{Workers: 4, Fenced: true})
	r.WaitFor(time.Minute, "5 writes", countWrites(5))
	kill(t, "redlock-1", "redlock-2", "redlock-3")
	down := Mono()
	time.Sleep(3 * time.Second)
	up := Mono()
	r.Healed() // liveness counts from the restart, which may itself take a while
	start(t, "redlock-1", "redlock-2", "redlock-3")
	r.WaitFor(time.Minute, "an acquisition after the restart", func(e Event) bool { return e.Kind == EvAcquire && e.Mono > up })
	h := r.Stop()
	judge(t, "7b Redlock: 3 of 5 masters killed", b, h, expect{must: allChecks})
	for _, e := range h.Events {
		// An acquire reported within 500ms of the kill may have completed
		// before it; none may start while the quorum is gone.
		if e.Kind == EvAcquire && e.Mono > down+int64(500*time.Millisecond) && e.Mono < up {
			t.Errorf("worker %d acquired (token %d) while 3 of 5 masters were down", e.Worker, e.Token)
		}
	}
}

// Scenario 7c: a master restarted empty during a hold hands the lock to a
// second client. Fencing with the two-phase token (and the TIME-seeded
// counter of the empty master) still rejects the stale holder.
//
// The victim stops itself between its read and its write until the next
// holder has written: left running, it could finish its step before the
// restart and the next holder's attempt came round on a busy machine, and
// the unfenced canary then saw nothing.
func redlockRestartEmpty(t *testing.T, b Backend) {
	b.TTL = 3 * time.Second
	for _, fenced := range []bool{false, true} {
		kill(t, "redlock-4", "redlock-5")
		r := Start(t, b, RunOptions{Workers: 3, Fenced: fenced, Hold: victimHold(100 * time.Millisecond), SelfStop: true})
		victim := r.WaitFor(time.Minute, "the victim's read (held on masters 1-3)", isRead(0))
		r.WaitStopped(0)
		kill(t, "redlock-1")
		start(t, "redlock-1", "redlock-4", "redlock-5")
		r.WaitFor(time.Minute, "a write by the next holder", writeAfter(victim))
		r.Resume(0)
		r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
		h := r.Stop()
		if fenced {
			judge(t, "7c Redlock: master restarted empty during a hold (fenced)", b, h,
				expect{must: []string{"stale-token", "monotone-tokens", "lost-updates"}})
		} else {
			judge(t, "7c Redlock: master restarted empty during a hold (unfenced)", b, h,
				expect{must: []string{"monotone-tokens"}, canary: []string{"exclusion", "stale-token", "lost-updates"}})
		}
	}
}

// Scenario 17 (Redis and Redlock, whose releases hand the lock to the
// first waiter in line): the waiters in line are paused (SIGSTOP) while the
// lock is held, so its release hands the lock to a paused process, which
// hears of the grant only when it resumes, after that grant's lease ran
// out and another worker took the lock. The lock must come back to the
// others within that lease and the liveness bound, and a resumed waiter
// must not take a grant whose lease ended for a hold: every check passes
// throughout.
func waitersPausedAtHandover(t *testing.T, b Backend) {
	r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Hold: victimHold(500 * time.Millisecond)})
	r.WaitFor(time.Minute, "the victim's read", isRead(0))
	time.Sleep(100 * time.Millisecond) // the others stand in line
	r.Pause(1)
	r.Pause(2)
	paused := Mono()
	r.WaitFor(time.Minute, "the victim's release to a paused waiter",
		func(e Event) bool { return e.Kind == EvRelease && e.Worker == 0 && e.Mono > paused })
	released := Mono()
	r.WaitFor(b.TTL+b.Liveness+time.Minute, "the victim's next acquisition",
		func(e Event) bool { return e.Kind == EvAcquire && e.Worker == 0 && e.Mono > released })
	time.Sleep(b.TTL) // the paused waiters' grants have run out
	r.Resume(1)
	r.Resume(2)
	r.Healed()
	resumed := Mono()
	r.WaitFor(time.Minute, "an acquisition by a resumed waiter",
		func(e Event) bool { return e.Kind == EvAcquire && e.Worker != 0 && e.Mono > resumed })
	judge(t, "17 waiters in line paused as the lock is handed over", b, r.Stop(), expect{must: allChecks})
}

// Scenario 8: the consensus leader killed, and paused (SIGSTOP: it answers
// neither peers nor clients), under load.
func leaderFaults(t *testing.T, b Backend) {
	for _, how := range []string{"killed", "paused (SIGSTOP)"} {
		r := Start(t, b, RunOptions{Workers: 4, Fenced: true})
		r.WaitFor(time.Minute, "10 writes", countWrites(10))
		leader, err := launcher.Leader(ctx(t), b.Name)
		if err != nil {
			t.Fatalf("leader of %s: %v", b.Name, err)
		}
		restartOnCleanup(t, leader)
		if how == "killed" {
			if err := launcher.Kill(ctx(t), leader); err != nil {
				t.Fatal(err)
			}
		} else if err := launcher.Pause(ctx(t), leader); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		if how == "killed" {
			start(t, leader)
		} else if err := launcher.Resume(ctx(t), leader); err != nil {
			t.Fatal(err)
		}
		r.Healed()
		heal := Mono()
		r.WaitFor(time.Minute, "an acquisition after the heal", func(e Event) bool { return e.Kind == EvAcquire && e.Mono > heal })
		more := countWrites(10)
		r.WaitFor(time.Minute, "10 writes after the heal", func(e Event) bool { return e.Mono > heal && more(e) })
		judge(t, "8 leader "+how, b, r.Stop(), expect{must: allChecks})
	}
}

// Scenario 8, isolated: the leader of a private copy of the cluster, whose
// peers talk over routes through proxies, is cut off from both other
// members, both ways, while clients still reach it. The other two must
// elect a leader and locking must go on during the partition; after the
// heal the old leader rejoins. Every check must pass, tokens monotone
// across the election.
func leaderIsolated(t *testing.T, b Backend) {
	px := NewProxies()
	defer px.Close()
	cl := StartCluster(t, px, b.Name)
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	b.URL = cl.T.URL()
	if u.RawQuery != "" {
		b.URL += "?" + u.RawQuery
	}
	r := Start(t, b, RunOptions{Workers: 4, Fenced: true})
	r.WaitFor(time.Minute, "10 writes", countWrites(10))
	cutAt := time.Now()
	old, link := cl.CutLeader(ctx(t), t)
	nl, err := cl.NewLeader(ctx(t), old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s cut off from its peers; %s elected after %v", old, nl, time.Since(cutAt).Round(time.Millisecond))
	elected := Mono()
	during := countWrites(5)
	r.WaitFor(time.Minute, "5 writes while the old leader is cut off", func(e Event) bool { return e.Mono > elected && during(e) })
	t.Logf("5 writes during the partition after %v", time.Since(cutAt).Round(time.Millisecond))
	if err := cl.Heal(link); err != nil {
		t.Fatal(err)
	}
	r.Healed()
	heal := Mono()
	after := countWrites(10)
	r.WaitFor(time.Minute, "10 writes after the heal", func(e Event) bool { return e.Mono > heal && after(e) })
	t.Logf("10 writes after the heal after %v", time.Since(cutAt).Round(time.Millisecond))
	judge(t, "8 leader isolated from its peers (peer routes cut)", b, r.Stop(), expect{must: allChecks})
}

// Scenario 11: a ZooKeeper client connected only to a follower that is cut
// off from its peers (the peer routes of a private copy of the ensemble),
// while clients on the leader's side wait for the same key. The cut-off
// follower may go on answering its clients from its own copy of the data
// for up to syncLimit x tickTime, while the leader expires the session,
// deletes the holder's node and grants the lock on: the cut-off holder's
// Done must close before the next holder's Lock returns. With fencing every
// check passes; after the heal the cut-off client locks again.
func followerIsolated(t *testing.T, b Backend) {
	px := NewProxies()
	defer px.Close()
	cl := StartCluster(t, px, b.Name)
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	leader, err := cl.L.Leader(ctx(t), cl.T.Name)
	if err != nil {
		t.Fatal(err)
	}
	var follower string
	var side []string // the leader's side: every node but the follower
	for _, n := range cl.T.Nodes {
		if n.Name != leader && follower == "" {
			follower = n.Name
			continue
		}
		side = append(side, n.Addr())
	}
	fn, _ := cl.T.Node(follower)
	withQuery := func(hosts string) string {
		s := u.Scheme + "://" + hosts
		if u.RawQuery != "" {
			s += "?" + u.RawQuery
		}
		return s
	}
	followerURL, sideURL := withQuery(fn.Addr()), withQuery(strings.Join(side, ","))
	// The victim holds long enough to be caught holding when the leader's
	// side grants the lock on, and to take its stale step after that.
	r := Start(t, b, RunOptions{Workers: 3, Fenced: true, Hold: victimHold(4 * b.TTL),
		URL: func(i int) string {
			if i == 0 {
				return followerURL
			}
			return sideURL
		}})
	victim := r.WaitFor(time.Minute, "the victim's read through the follower", isRead(0))
	link, err := cl.Routes.Isolate(follower)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Heal(link) })
	cutAt := time.Now()
	if err := link.Cut(); err != nil {
		t.Fatal(err)
	}
	t.Logf("follower %s (leader %s) cut off from its peers while worker 0 holds token %d", follower, leader, victim.Token)
	next := r.WaitFor(time.Minute, "the next holder on the leader's side",
		func(e Event) bool { return e.Kind == EvAcquire && e.Worker != 0 && e.Token > victim.Token })
	t.Logf("next holder (worker %d) acquired %v after the cut", next.Worker, time.Since(cutAt).Round(time.Millisecond))
	r.WaitFor(time.Minute, "the victim's stale step", staleStep(victim))
	if err := cl.Heal(link); err != nil {
		t.Fatal(err)
	}
	r.Healed()
	r.WaitFor(2*time.Minute, "the victim locking again after the heal",
		func(e Event) bool { return e.Kind == EvAcquire && e.Worker == 0 && e.Token > victim.Token })
	h := r.Stop()
	judge(t, "11 ZooKeeper client on a follower cut off from its peers (fenced)", b, h,
		expect{must: allChecks, extra: []Check{checkLossBeforeNext(h, victim)}})
	if !rejected(h, victim) {
		t.Errorf("%s: the cut-off holder's stale write was not rejected", b.Name)
	}
}

// checkLossBeforeNext: the victim's Done closed before the next holder's
// Lock returned.
func checkLossBeforeNext(h History, victim Event) Check {
	c := Check{Name: "done-before-next-grant"}
	var lost, next *Event
	for _, e := range sorted(h.Events) {
		switch {
		case lost == nil && e.Kind == EvLost && e.Worker == victim.Worker && e.Token == victim.Token:
			lost = &e
		case next == nil && e.Kind == EvAcquire && e.Worker != victim.Worker && e.Token > victim.Token:
			next = &e
		}
	}
	switch {
	case next == nil:
		c.Violations, c.Detail = 1, "no holder after the victim"
	case lost == nil:
		c.Violations, c.Detail = 1, fmt.Sprintf("worker %d never reported the loss of token %d", victim.Worker, victim.Token)
	case lost.Mono >= next.Mono:
		c.Violations = 1
		c.Detail = fmt.Sprintf("worker %d's Done closed %v after worker %d's Lock returned (token %d)",
			victim.Worker, time.Duration(lost.Mono-next.Mono).Round(time.Millisecond), next.Worker, next.Token)
	default:
		c.Detail = fmt.Sprintf("Done closed %v before the next Lock returned", time.Duration(next.Mono-lost.Mono).Round(time.Millisecond))
	}
	return c
}
