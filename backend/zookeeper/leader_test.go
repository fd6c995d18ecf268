//go:build !race

// Killing the leader makes go-zookeeper reconnect with watches set; see
// reconnect_test.go for why this runs without the race detector.

package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/testenv"
)

// fenced is the resource the lock protects: it records every holder's
// token in the order the holds began, and counts overlapping holders.
type fenced struct {
	inside   atomic.Int32
	overlaps atomic.Int32

	mu     sync.Mutex
	tokens []dlock.Token
	times  []time.Time
}

func (f *fenced) enter(tok dlock.Token) {
	if f.inside.Add(1) != 1 {
		f.overlaps.Add(1)
	}
	f.mu.Lock()
	f.tokens = append(f.tokens, tok)
	f.times = append(f.times, time.Now())
	f.mu.Unlock()
}

func (f *fenced) leave() { f.inside.Add(-1) }

// Killing the ensemble's leader while several sessions contend for a key:
// the sessions survive the election, no two holders overlap, every holder
// gets a greater token than the one before (the new leader's epoch shows
// in the czxid's high half), and locking resumes.
func TestLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a ZooKeeper node")
	}
	raw := endpoint(t, "DLOCK_ZK3_URL", "session_timeout=10s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader, err := launcher.Leader(ctx, "zookeeper3")
	if err != nil {
		t.Fatalf("finding the leader of zookeeper3: %v", err)
	}
	// Node control needs the servers `make up` started; SIGCONT to a
	// running node changes nothing and tells whether we have it.
	if err := launcher.Resume(ctx, leader); err != nil {
		if testenv.Required("DLOCK_ZK3_URL") {
			t.Fatalf("no node control over %s: %v", leader, err)
		}
		t.Skipf("no node control over %s (servers not started by the launcher?): %v", leader, err)
	}

	const lockers, perLocker = 3, 2
	key := fmt.Sprintf("leader-kill/%d", time.Now().UnixNano())
	var (
		res     fenced
		drivers []*zkDriver
		sids    []int64
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		lost    atomic.Int32 // holds whose Done closed
		errs    sync.Map     // error text -> count, for the log
		errN    atomic.Int32
		killed  atomic.Int64 // UnixNano of the kill, 0 before
		after   atomic.Int32 // acquisitions that began after the kill
		wantErr = func(err error) bool {
			return errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrLockLost) ||
				errors.Is(err, context.DeadlineExceeded)
		}
		fatal = make(chan error, lockers*perLocker)
	)
	for i := 0; i < lockers; i++ {
		d, l := lockerOn(t, raw)
		drivers = append(drivers, d)
		sids = append(sids, d.conn.SessionID())
		for j := 0; j < perLocker; j++ {
			m, err := l.NewMutex(key)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
					err := m.Lock(lctx)
					lcancel()
					if err != nil {
						if !wantErr(err) {
							fatal <- fmt.Errorf("Lock: %w", err)
							return
						}
						errN.Add(1)
						n, _ := errs.LoadOrStore(err.Error(), new(atomic.Int32))
						n.(*atomic.Int32).Add(1)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					if killed.Load() != 0 {
						after.Add(1)
					}
					res.enter(m.Token())
					time.Sleep(2 * time.Millisecond)
					select {
					case <-m.Done():
						lost.Add(1)
					default:
					}
					res.leave()
					if err := m.Unlock(ctx); err != nil && !wantErr(err) {
						fatal <- fmt.Errorf("Unlock: %w", err)
						return
					}
				}
			}()
		}
	}

	time.Sleep(2 * time.Second)
	t.Logf("killing the leader %s", leader)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
			defer scancel()
			_ = launcher.Start(sctx, leader)
		}
	})
	if err := launcher.Kill(ctx, leader); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("kill %s: %v", leader, err)
	}
	killed.Store(time.Now().UnixNano())
	time.Sleep(3 * time.Second)
	if err := launcher.Start(ctx, leader); err != nil {
		t.Errorf("start %s again: %v", leader, err)
	} else {
		restarted = true
	}
	newLeader, err := launcher.Leader(ctx, "zookeeper3")
	t.Logf("restarted %s; leader now %s (%v)", leader, newLeader, err)
	// Let locking go on until well after the election.
	for end := time.Now().Add(45 * time.Second); after.Load() < 50 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	close(fatal)
	for err := range fatal {
		t.Error(err)
	}

	errs.Range(func(k, v any) bool {
		t.Logf("%d x %v", v.(*atomic.Int32).Load(), k)
		return true
	})
	res.mu.Lock()
	defer res.mu.Unlock()
	kill := time.Unix(0, killed.Load())
	var before, since int
	var epochBefore, epochAfter uint64
	for i, tok := range res.tokens {
		if i > 0 && tok <= res.tokens[i-1] {
			t.Errorf("holder %d got token %#x after %#x", i, tok, res.tokens[i-1])
		}
		if res.times[i].Before(kill) {
			before++
			epochBefore = uint64(tok) >> 32
		} else {
			since++
			epochAfter = uint64(tok) >> 32
		}
	}
	t.Logf("%d holds before the kill, %d after; epoch %d -> %d; %d lost holds, %d failed Locks",
		before, since, epochBefore, epochAfter, lost.Load(), errN.Load())
	if n := res.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping holders", n)
	}
	if before == 0 || after.Load() == 0 {
		t.Errorf("locking did not go on: %d holds before the kill, %d after", before, after.Load())
	}
	if epochAfter <= epochBefore {
		t.Errorf("token epoch %d after the election; want more than %d", epochAfter, epochBefore)
	}
	for i, d := range drivers {
		if got := d.conn.SessionID(); got != sids[i] {
			t.Errorf("locker %d: session 0x%x became 0x%x; want it to survive the election", i, sids[i], got)
		}
	}
}
