package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A Lock whose context ends while its create is on its way returns an
// error, and must hold nothing then: the node the create makes is deleted
// before Lock returns. It was left to the cleaner, which deleted it a
// moment after Lock had returned, so another process's TryLock made right
// after that error was refused (the conformance case CancelAtGrant caught
// it under load). Here the create is held back by a blocked connection
// until after the context has ended.
func TestCancelledCreateLeavesNothing(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	p := newProxy(t, hosts(t, raw)[0])
	key := fmt.Sprintf("cancelled-create/%d", time.Now().UnixNano())
	keepKeyNode(t, raw, key) // before the Locker: deleted after it closes
	_, l := lockerOn(t, "zk://"+p.addr()+testPrefix+"?session_timeout=9s")
	adm := admin(t, raw)
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	lockNow(t, m)
	if err := m.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	kp, err := KeyPath(testPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	p.block()
	var unblocked atomic.Bool
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	type result struct {
		err   error
		after bool // Lock returned after the create could be answered
	}
	locked := make(chan result, 1)
	go func() {
		err := m.Lock(ctx)
		locked <- result{err, unblocked.Load()}
	}()
	<-ctx.Done()
	time.Sleep(200 * time.Millisecond)
	unblocked.Store(true)
	p.unblock()
	r := <-locked
	if r.err == nil {
		t.Fatal("Lock returned nil after its context ended with its create held back")
	}
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v; want the context's error", r.err)
	}
	if !r.after {
		t.Fatal("Lock returned before its create was answered: the node the create makes outlives Lock")
	}
	children, _, err := adm.Children(kp)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	if len(children) != 0 {
		t.Fatalf("after Lock returned its error, the key's line holds %v; want nothing", children)
	}
}
