package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
	"github.com/dlock-go/dlock/internal/launcher"
)

// A leader paused past the lease TTL wakes up with every lease in its
// memory, finds them expired and has them revoked, also the ones the new
// leader kept alive meanwhile. So the driver moves the entries of leases
// granted before a leader change onto leases of the new term, keeping
// their names and create revisions: a hold outlives the paused leader's
// waking up with its token, and a waiter keeps its place in the queue.
//
// A waiter keeps its lease alive with one keepalive round per interval,
// each of a second or two: when every one of them reaches the paused
// member (a loaded machine makes that likelier), the new leader lets its
// lease expire. The waiter then lost its place, not a lock: it queues
// again, behind the holder, and is granted the token of its new entry.
// A lease revoked while the waiter's own clock still counted it alive
// fails its Lock with ErrLockLost. Those outcomes are allowed for the
// waiter; any other is not.
func TestLeaderPauseMovesEntries(t *testing.T) {
	for _, perHold := range []bool{false, true} {
		t.Run(map[bool]string{false: "shared-lease", true: "lease-per-hold"}[perHold], func(t *testing.T) {
			e := newEnv(t, "DLOCK_ETCD3_URL")
			e.perHold = perHold
			leaderPauseMovesEntries(t, e)
		})
	}
}

func leaderPauseMovesEntries(t *testing.T, e *env) {
	ctx := ctxFor(t, 3*time.Minute)
	leader := etcd3Leader(ctx, t)
	paused := false
	t.Cleanup(func() {
		if paused {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = launcher.Resume(sctx, leader)
		}
	})

	// Renewals go on under the new leader well before the hold's window
	// on the old lease ends, although every request sent to the paused
	// member waits out its attempt's bound (a second).
	const (
		ttl = 3 * etcd.MinTTL
		key = "leader-pause"
	)
	m, _ := e.mustLocker(t, dlock.WithTTL(ttl)).NewMutex(key)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w, _ := e.mustLocker(t, dlock.WithTTL(ttl)).NewMutex(key)
	waited := make(chan error, 1)
	go func() { waited <- w.Lock(ctx) }()
	entries := func() *clientv3.GetResponse {
		t.Helper()
		resp, err := e.admin.Get(ctx, etcd.QueuePrefix(e.prefix, key), clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var before []int64 // create revisions, then leases, of the two entries
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if kvs := entries().Kvs; len(kvs) == 2 {
			before = []int64{kvs[0].CreateRevision, kvs[1].CreateRevision, kvs[0].Lease, kvs[1].Lease}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not queue")
		}
	}
	if uint64(m.Token()) != uint64(before[0]) {
		t.Fatalf("holder's token %d, its entry's create revision %d", m.Token(), before[0])
	}

	if err := launcher.Pause(ctx, leader); err != nil {
		t.Fatalf("Pause(%s): %v", leader, err)
	}
	paused = true
	// Past the TTL in the paused leader's memory, and long enough for
	// the entries to move although every request sent to the paused
	// member waits out its attempt's bound.
	time.Sleep(ttl + 4*time.Second)
	if err := launcher.Resume(ctx, leader); err != nil {
		t.Fatalf("Resume(%s): %v", leader, err)
	}
	paused = false
	time.Sleep(ttl) // the woken leader's revocations, if any, are applied
	waitCaughtUp(t, e.admin)

	select {
	case <-m.Done():
		t.Fatalf("the hold granted before the pause was lost: %v", m.Err())
	default:
	}
	kvs := entries().Kvs
	if len(kvs) == 1 {
		select {
		case err := <-waited:
			if !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("the waiter's entry is gone and its Lock returned %v; want ErrLockLost", err)
			}
			waited <- nil // the holder is checked alone
			w = nil
		case <-time.After(10 * time.Second):
			kvs = entries().Kvs // it queued again meanwhile
		}
	}
	if len(kvs) == 2 && kvs[1].CreateRevision != before[1] {
		// The waiter's lease expired and it queued again.
		if kvs[1].CreateRevision < before[1] {
			t.Fatalf("the waiter's entry has create revision %d, below %d before the pause", kvs[1].CreateRevision, before[1])
		}
		t.Logf("the waiter's lease expired during the pause; it queued again at %d (first at %d)", kvs[1].CreateRevision, before[1])
		before[1] = kvs[1].CreateRevision
	}
	if w != nil && len(kvs) != 2 {
		select {
		case err := <-waited:
			t.Fatalf("%d entries in the queue after the pause; the waiter's Lock returned %v", len(kvs), err)
		default:
			t.Fatalf("%d entries in the queue after the pause; want the holder's and the waiter's", len(kvs))
		}
	}
	for i, kv := range kvs {
		if kv.CreateRevision != before[i] {
			t.Errorf("entry %d: create revision %d, %d before the pause", i, kv.CreateRevision, before[i])
		}
		if kv.Lease == before[2+i] {
			t.Errorf("entry %d is still on lease %x, granted before the leader changed", i, kv.Lease)
		}
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiter's Lock: %v", err)
	}
	if w == nil {
		return
	}
	if uint64(w.Token()) != uint64(before[1]) {
		t.Fatalf("the waiter was granted token %d; it queued at %d", w.Token(), before[1])
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
