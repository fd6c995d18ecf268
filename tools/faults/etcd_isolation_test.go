package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
)

// A member cut off from its peers (every peer route to and from it cut,
// while clients still reach it) must not fail a Locker that knows all three
// members. It refuses each call at once for want of a leader, having applied
// nothing, and the call goes to another member. Without the require-leader
// flag it would hold the call for etcd's request timeout and then fail it,
// and a Lock whose calls meet it would return ErrUnavailable.
func TestEtcdIsolatedMember(t *testing.T) {
	testenv.Endpoint(t, "DLOCK_ETCD3_URL") // the servers are installed
	px := NewProxies()
	defer px.Close()
	cl := StartCluster(t, px, "etcd3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old, _ := cl.CutLeader(ctx, t)
	if _, err := cl.NewLeader(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Until the cut-off member itself notices (an election timeout), it may
	// still take calls as leader.
	for {
		if lead, err := cl.L.IsLeader(ctx, old); err == nil && !lead {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still leads: %v", old, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	l, err := dlock.Open(ctx, cl.T.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Each Lock and Unlock makes several calls, sent round robin to the
	// three members: some meet the cut-off one.
	for i := range 10 {
		m, err := l.NewMutex(fmt.Sprintf("isolated-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := m.Lock(lctx); err != nil {
			t.Fatalf("lock %d with %s cut off: %v", i, old, err)
		}
		if err := m.Unlock(lctx); err != nil {
			t.Fatalf("unlock %d with %s cut off: %v", i, old, err)
		}
		cancel()
	}
}
