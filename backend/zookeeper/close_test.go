package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
)

// Close of a Locker over a Conn the caller keeps open leaves no waiter's
// node behind: the session lives on, so such a node would block every
// other process's Lock on the key until the caller closed its Conn.
func TestCloseOverCallerConnLeavesNoWaiter(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout="+sessionTimeout.String())
	servers := hosts(t, raw)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "close-over-conn/" + time.Now().Format(time.RFC3339Nano)

	holderL, err := openLocker(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	defer holderL.Close()
	holder, _ := holderL.NewMutex(key)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}

	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogInfo(false), zk.WithLogger(discardLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close() // only when the test ends: the session outlives the Locker
	l, err := New(conn, Config{SessionTimeout: sessionTimeout, Prefix: testPrefix})
	if err != nil {
		t.Fatal(err)
	}
	waiters := make(chan error, 3)
	for i := 0; i < 3; i++ {
		m, _ := l.NewMutex(key)
		go func() { waiters <- m.Lock(ctx) }()
	}
	// Wait until the Locker's waiter has queued its node.
	kp, err := KeyPath(testPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	adm := admin(t, raw)
	for {
		children, _, err := adm.Children(kp)
		if err == nil && len(children) >= 2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the waiter never queued: %v, %v", children, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := <-waiters; !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("a Lock waiting when Close came: %v; want ErrClosed", err)
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if children, _, err := adm.Children(kp); err != nil || len(children) != 0 {
		t.Fatalf("after Close and the holder's Unlock, %s has %v (%v); want no node (the closed Locker's waiter was left behind)", kp, children, err)
	}
	other, _ := holderL.NewMutex(key)
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the closed Locker's waiters: %v", err)
	}
	_ = other.Unlock(ctx)
}
