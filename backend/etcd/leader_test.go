package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
	"github.com/dlock-go/dlock/internal/launcher"
	"github.com/dlock-go/dlock/internal/testenv"
)

// Killing the leader of the 3-member cluster during contended locking:
// exclusion holds, tokens keep increasing across the election, locking
// resumes under the new leader, and the killed member rejoins and serves
// locks again. The nodes are controlled through the launcher (make up).
func TestLeaderKill(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD3_URL")
	ctx := ctxFor(t, 3*time.Minute)
	leader := etcd3Leader(ctx, t)
	killed := false
	t.Cleanup(func() {
		if killed { // whatever happened, bring the member back
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = launcher.Start(sctx, leader)
		}
	})

	const (
		key     = "leader-kill"
		workers = 6
	)
	var (
		inside, overlaps     atomic.Int32
		held, failed, losses atomic.Int64
		mu                   sync.Mutex
		last                 dlock.Token
		decreases            int
		stop                 = make(chan struct{})
		killedAt             atomic.Value
		wg                   sync.WaitGroup
	)
	killedAt.Store(time.Now().Add(time.Hour))
	for w := 0; w < workers; w++ {
		m, _ := e.mustLocker(t, dlock.WithTTL(etcd.MinTTL)).NewMutex(key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := m.Lock(lctx)
				cancel()
				if err != nil {
					// The election makes requests fail for a while: that is
					// reported, not hidden, and the worker tries again.
					if !errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, dlock.ErrLockLost) {
						t.Errorf("Lock: %v", err)
						return
					}
					if failed.Add(1) <= 10 {
						t.Logf("%v after the kill (if any): %v", time.Since(killedAt.Load().(time.Time)).Round(time.Millisecond), err)
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				// A grant comes with most of a TTL to act in, also when the
				// waiter's keepalives failed during the election.
				if left := time.Until(m.Lease().Expires); left < etcd.MinTTL/3 {
					t.Errorf("granted with %v of validity left (TTL %v)", left, m.Lease().TTL)
				}
				mu.Lock()
				if m.Token() <= last {
					decreases++
				}
				last = m.Token()
				mu.Unlock()
				held.Add(1)
				time.Sleep(2 * time.Millisecond)
				inside.Add(-1)
				uctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if err := m.Unlock(uctx); errors.Is(err, dlock.ErrLockLost) {
					losses.Add(1)
				} else if err != nil && !errors.Is(err, dlock.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Unlock: %v", err)
				}
				cancel()
			}
		}()
	}
	waitHeld := func(n int64, within time.Duration, what string) {
		t.Helper()
		want := held.Load() + n
		deadline := time.Now().Add(within)
		for held.Load() < want {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("%s: fewer than %d acquisitions within %v", what, n, within)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitHeld(50, 30*time.Second, "before the kill")
	mu.Lock()
	before := last
	mu.Unlock()
	if err := launcher.Kill(ctx, leader); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("Kill(%s): %v", leader, err)
	}
	killed = true
	start := time.Now()
	killedAt.Store(start)
	waitHeld(10, time.Minute, "after the kill")
	resumed := time.Since(start)
	waitHeld(50, time.Minute, "after the kill")
	newLeader, err := launcher.Leader(ctx, "etcd3")
	if err != nil {
		t.Errorf("no leader after the kill: %v", err)
	} else if newLeader == leader {
		t.Errorf("leader still %s after it was killed", leader)
	}
	if err := launcher.Start(ctx, leader); err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("Start(%s): %v", leader, err)
	}
	killed = false
	waitHeld(50, time.Minute, "after the restart")
	close(stop)
	wg.Wait()

	t.Logf("killed leader %s; new leader %s; 10 acquisitions %v after the kill; %d failed attempts, %d holds lost; tokens %d -> %d",
		leader, newLeader, resumed.Round(time.Millisecond), failed.Load(), losses.Load(), before, last)
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping holds", n)
	}
	if decreases != 0 {
		t.Fatalf("tokens did not increase %d times", decreases)
	}
	if last <= before {
		t.Fatalf("token %d after the election not above %d", last, before)
	}

	// The member that was killed rejoined: a Locker that talks to it alone
	// locks, and its raft log caught up with the others'.
	addr, err := launcher.Addr(leader)
	if err != nil {
		t.Fatalf("Addr(%s): %v", leader, err)
	}
	cfg := e.cfg
	cfg.Endpoints = []string{addr}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("client of %s: %v", leader, err)
	}
	l, err := etcdNew(cli, etcd.Config{Prefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(); _ = cli.Close() })
	m, _ := l.NewMutex(key)
	if err := m.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock through the rejoined member %s: %v", leader, err)
	}
	if m.Token() <= last {
		t.Fatalf("token through the rejoined member %d not above %d", m.Token(), last)
	}
	if err := m.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock through the rejoined member: %v", err)
	}
	st, err := cli.Status(ctxFor(t, 10*time.Second), addr)
	if err != nil {
		t.Fatalf("Status(%s): %v", addr, err)
	}
	if st.Leader == 0 {
		t.Fatalf("rejoined member %s has no leader", leader)
	}
	waitCaughtUp(t, e.admin)
}

// etcd3Leader returns the launcher's name of the member leading etcd3. It
// fails the test when the launcher does not run etcd3 and make test
// requires it, and skips it otherwise.
func etcd3Leader(ctx context.Context, t *testing.T) string {
	t.Helper()
	leader, err := launcher.Leader(ctx, "etcd3")
	if err != nil {
		if testenv.Required("DLOCK_ETCD3_URL") {
			t.Fatalf("launcher.Leader(etcd3): %v", err)
		}
		t.Skipf("etcd3 is not run by the launcher (make up): %v", err)
	}
	return leader
}

// waitCaughtUp waits until every member follows one leader and has applied
// the leader's log, so that the tests after this one find a settled cluster.
func waitCaughtUp(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := caughtUp(ctxFor(t, 5*time.Second), cli)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not settled a minute after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func caughtUp(ctx context.Context, cli *clientv3.Client) error {
	var leader uint64
	var index []uint64
	for _, ep := range cli.Endpoints() {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			return err
		}
		if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return fmt.Errorf("%s: leader %x, others %x", ep, st.Leader, leader)
		}
		leader = st.Leader
		index = append(index, st.RaftAppliedIndex)
	}
	for _, i := range index {
		if i+100 < slices.Max(index) {
			return fmt.Errorf("applied indexes %v", index)
		}
	}
	return nil
}
