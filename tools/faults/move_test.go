//go:build faults

package faults

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/move"
	"github.com/dlock-go/dlock/internal/move/movetest"
	"github.com/dlock-go/dlock/internal/testenv"
)

// Scenario 21: a fleet moved from one backend to another by rolling
// restarts (docs/moving.md): four workers on the fenced register go from
// X (C0) to move:?from=X&to=Y (C1) one at a time, one of them killed
// and one paused past its lease on the way; the move is committed; then
// each goes to move:?to=Y (C2), one killed again. Every check must pass,
// and every restarted worker must write before the next restart.
//
// Scenario 21c, its canary: the commit is forced at once and half the
// workers jump from C0 to C2, so old and new configurations run side by
// side on two stores that know nothing of each other: the exclusion
// check must see the overlap.

// moveBackend is the run's backend: the workers start on from's URL,
// with a lease both stores honour.
func moveBackend(from, to Backend) Backend {
	return Backend{Name: from.Name + "-to-" + to.Name, URL: from.URL, TTL: max(from.TTL, to.TTL),
		Grace: max(from.Grace, to.Grace), Liveness: max(from.Liveness, to.Liveness)}
}

func moveC1(from, to Backend) string {
	return "move:?from=" + url.QueryEscape(from.URL) + "&to=" + url.QueryEscape(to.URL)
}

func moveC2(to Backend) string { return "move:?to=" + url.QueryEscape(to.URL) }

// commitMove runs what lockctl move commit does.
func commitMove(t *testing.T, from, to Backend) move.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := dlock.OpenDriver(ctx, from.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := dlock.OpenDriver(ctx, to.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	rec, _, err := move.Commit(ctx, x, y, from.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { movetest.ClearCommit(t, to.URL, rec) })
	return rec
}

// writeBy matches an accepted write by worker.
func writeBy(worker int) func(Event) bool {
	return func(e Event) bool { return e.Kind == EvWrite && e.Worker == worker }
}

func rollingMove(t *testing.T, from, to Backend) {
	b := moveBackend(from, to)
	r := Start(t, b, RunOptions{Workers: 4, Fenced: true})
	r.WaitFor(time.Minute, "10 writes on X", countWrites(10))
	ids := []int{0, 1, 2, 3}
	step := func(target string, fault func(i int)) {
		for i := range ids {
			if fault != nil {
				fault(i)
			}
			ids[i] = r.Restart(ids[i], target)
			r.Healed()
			r.WaitFor(2*time.Minute, fmt.Sprintf("a write by worker %d", ids[i]), writeBy(ids[i]))
		}
	}
	step(moveC1(from, to), func(i int) {
		switch i {
		case 1:
			r.Kill(ids[i])
		case 2:
			r.WaitFor(time.Minute, "a read by worker "+fmt.Sprint(ids[i]), isRead(ids[i]))
			r.Pause(ids[i])
			time.Sleep(b.TTL + b.Grace + 500*time.Millisecond)
			r.Resume(ids[i]) // its late write, if any, must be refused
		}
	})
	commitMove(t, from, to)
	step(moveC2(to), func(i int) {
		if i == 3 {
			r.Kill(ids[i])
		}
	})
	r.WaitFor(time.Minute, "10 more writes", countWrites(10+8+10))
	judge(t, "21 rolling move", b, r.Stop(), expect{must: allChecks})
}

func rollingMoveCanary(t *testing.T, from, to Backend) {
	b := moveBackend(from, to)
	r := Start(t, b, RunOptions{Workers: 4, Fenced: true})
	r.WaitFor(time.Minute, "10 writes on X", countWrites(10))
	commitMove(t, from, to) // forced: every worker still runs C0
	r.Restart(2, moveC2(to))
	r.Restart(3, moveC2(to))
	r.WaitFor(2*time.Minute, "40 writes", countWrites(40))
	judge(t, "21c move with C1 skipped", b, r.Stop(), expect{must: []string{"stale-token"}, canary: []string{"exclusion"}})
}

// ownPrefix gives a run's new store a namespace of its own (an etcd or
// ZooKeeper prefix, a Redis key prefix; on PostgreSQL one table for the
// scenario, whose record commitMove clears): the commit
// record is one per store, and a record left by another run would make
// this run's C1 workers lift their tokens while its C0 workers still run
// (the step lockctl move commit refuses).
func ownPrefix(t *testing.T, b Backend) Backend {
	name := testenv.Unique(t, "dlock_faults_move")
	u, err := url.Parse(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	switch u.Scheme {
	case "redis":
		q.Set("prefix", name)
	case "postgres", "postgresql":
		q.Set("table", "dlock_faults_move") // one table; commitMove clears its record
	default:
		u.Path = "/" + name
	}
	u.RawQuery = q.Encode()
	b.URL = u.String()
	return b
}

func TestMoveRedisToEtcd(t *testing.T) {
	t.Run("21-rolling-move", func(t *testing.T) { rollingMove(t, redisB(t), ownPrefix(t, etcdB(t))) })
	t.Run("21c-canary-c1-skipped", func(t *testing.T) { rollingMoveCanary(t, redisB(t), ownPrefix(t, etcdB(t))) })
}

func TestMoveOtherPairs(t *testing.T) {
	pairs := []struct {
		name     string
		from, to func(*testing.T) Backend
	}{
		{"redis-zookeeper", redisB, zkB},
		{"redis-postgres", redisB, postgresB},
		{"file-redis", fileB, redisB},
	}
	for _, p := range pairs {
		t.Run("21-rolling-move/"+p.name, func(t *testing.T) { rollingMove(t, p.from(t), ownPrefix(t, p.to(t))) })
		t.Run("21c-canary-c1-skipped/"+p.name, func(t *testing.T) { rollingMoveCanary(t, p.from(t), ownPrefix(t, p.to(t))) })
	}
}
