//go:build !race

// These tests make go-zookeeper reconnect while watches are set. Its
// v1.0.4 reads Conn.lastZxid in sendSetWatches while recvLoop writes it, a
// data race inside the library that the race detector reports
// nondeterministically; make test runs them in a pass without -race.

package zookeeper

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A session closed from outside (with its ID and password, as Curator's
// KillSession does) closes Done at once, and the node is not re-created
// when the client comes back with a new session.
func TestSessionKilledFromOutside(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=4s")
	adm := admin(t, raw)
	d, l := lockerOn(t, raw)
	key := fmt.Sprintf("session-killed/%d", time.Now().UnixNano())
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	lockNow(t, m)
	node := onlyNode(t, adm, key)
	s, token := d.sess.get(), m.Token()
	if s.id == 0 || len(s.passwd) == 0 || s.id != d.conn.SessionID() {
		t.Fatalf("session seen on the wire: %+v; conn says 0x%x", s, d.conn.SessionID())
	}
	if err := killSession(d.conn.Server(), s); err != nil {
		t.Fatalf("killSession: %v", err)
	}
	killed := time.Now()
	waitClosed(t, m.Done(), 10*time.Second, "Done closes after the session was closed from outside")
	t.Logf("Done closed %v after the session was killed", time.Since(killed))
	if ok, _, err := adm.Exists(node); err != nil || ok {
		t.Fatalf("node %s after the session was killed: exists=%v, %v", node, ok, err)
	}
	afterLoss(t, d, m, adm, s.id, token)
}

// A client cut off from the servers gives its locks up (Done closes)
// before the server can expire its session; when it reconnects after the
// expiry it gets a new session and its node stays gone.
func TestPartitionLosesBeforeExpiry(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	adm := admin(t, raw)
	p := newProxy(t, hosts(t, raw)[0])
	const T = 3 * time.Second
	d, l := lockerOn(t, "zk://"+p.addr()+testPrefix+"?session_timeout="+T.String())
	key := fmt.Sprintf("partition/%d", time.Now().UnixNano())
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	lockNow(t, m)
	node := onlyNode(t, adm, key)
	ok, _, deleted, err := adm.ExistsW(node)
	if err != nil || !ok {
		t.Fatalf("ExistsW(%s): %v, %v", node, ok, err)
	}
	sid, token := d.conn.SessionID(), m.Token()

	p.block()
	cut := time.Now()
	waitClosed(t, m.Done(), 3*T, "Done closes while the client is cut off")
	lost := time.Since(cut)
	select {
	case ev := <-deleted:
		t.Fatalf("the server expired the session (%v) before Done closed", ev)
	default:
	}
	select {
	case ev := <-deleted:
		if ev.Type != zk.EventNodeDeleted {
			t.Fatalf("admin watch: %+v", ev)
		}
	case <-time.After(3 * T):
		t.Fatal("the server did not expire the partitioned session")
	}
	t.Logf("cut off: Done closed after %v, the server deleted the node after %v (session timeout %v)", lost, time.Since(cut), T)
	p.unblock()
	afterLoss(t, d, m, adm, sid, token)
}
