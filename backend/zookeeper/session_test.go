package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
)

// lockerOn dials a driver for raw and wraps it; both are closed at the end.
func lockerOn(t *testing.T, raw string, opts ...dlock.Option) (*zkDriver, *dlock.Locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := openDriver(ctx, raw)
	if err != nil {
		t.Fatalf("open %s: %v", raw, err)
	}
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return d, l
}

func lockNow(t *testing.T, m *dlock.Mutex) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock(%q): %v", m.Key(), err)
	}
}

// keepKeyNode creates key's znode as a persistent node, deleted when the
// test ends. The driver makes it a container, which the server deletes
// once it is empty at its periodic sweep (every minute here); a sweep
// that fell between an Unlock and a create answered late made that
// create fail with ErrNoNode, and the create sent again after the cut
// was answered at once, with nothing late left to test (it failed about
// one run in eight).
func keepKeyNode(t *testing.T, raw, key string) {
	t.Helper()
	kp, err := KeyPath(testPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	adm := admin(t, raw)
	p := ""
	for _, seg := range strings.Split(kp[1:], "/") {
		p += "/" + seg
		if _, err := adm.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	t.Cleanup(func() {
		if err := adm.Delete(kp, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("delete %s: %v", kp, err)
		}
	})
}

// onlyNode returns the path of the single lock node of key.
func onlyNode(t *testing.T, adm *zk.Conn, key string) string {
	t.Helper()
	kp, err := KeyPath(testPrefix, key)
	if err != nil {
		t.Fatal(err)
	}
	children, _, err := adm.Children(kp)
	if err != nil || len(children) != 1 {
		t.Fatalf("children of %s: %v, %v; want one lock node", kp, children, err)
	}
	return kp + "/" + children[0]
}

// stayEmpty fails unless key has no lock node now and for the next d.
func stayEmpty(t *testing.T, adm *zk.Conn, key string, d time.Duration) {
	t.Helper()
	kp, _ := KeyPath(testPrefix, key)
	for end := time.Now().Add(d); ; {
		children, _, err := adm.Children(kp)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			t.Fatalf("children of %s: %v", kp, err)
		}
		if len(children) > 0 {
			t.Fatalf("%s has nodes %v; want none", kp, children)
		}
		if time.Now().After(end) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventually waits up to d for cond.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(d):
		t.Fatalf("not within %v: %s", d, what)
	}
}

// afterLoss checks what a Mutex whose session ended must report, and that
// its node is never created again behind its back.
func afterLoss(t *testing.T, d *zkDriver, m *dlock.Mutex, adm *zk.Conn, oldSID int64, oldToken dlock.Token) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	eventually(t, 20*time.Second, "the client reconnects with a new session", func() bool {
		s := d.conn.SessionID()
		return s != 0 && s != oldSID && d.conn.State() == zk.StateHasSession
	})
	stayEmpty(t, adm, m.Key(), time.Second)
	if err := m.Renew(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Renew after the session ended: %v; want ErrLockLost", err)
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the session ended: %v; want ErrLockLost", err)
	}
	stayEmpty(t, adm, m.Key(), 200*time.Millisecond)
	lockNow(t, m)
	if m.Token() <= oldToken {
		t.Fatalf("token %d after the new Lock; want more than %d", m.Token(), oldToken)
	}
	_, st, err := adm.Exists(onlyNode(t, adm, m.Key()))
	if err != nil || st.EphemeralOwner != d.conn.SessionID() {
		t.Fatalf("new node: %+v, %v; want owned by the new session 0x%x", st, err, d.conn.SessionID())
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Lock or TryLock that gives up while its create is stuck leaves nothing
// behind once the create gets through, whether its reply comes back late
// (the node is deleted when it does) or never (the connection broke: the
// node is found by its GUID and deleted).
func TestAbandonedCreateIsCleanedUp(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	adm := admin(t, raw)
	const T = 6 * time.Second // go-zookeeper drops a silent connection after 2T/3 = 4s
	for _, c := range []struct {
		name  string
		try   bool
		block time.Duration
	}{
		{"LockLateReply", false, 500 * time.Millisecond},
		{"TryLockLostReply", true, 5 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newProxy(t, hosts(t, raw)[0])
			d, l := lockerOn(t, "zk://"+p.addr()+testPrefix+"?session_timeout="+T.String(), dlock.WithTTL(T))
			key := fmt.Sprintf("abandoned/%s/%d", c.name, time.Now().UnixNano())
			m, err := l.NewMutex(key)
			if err != nil {
				t.Fatal(err)
			}
			// The key's znode exists already, so the create is the first
			// request to get stuck.
			lockNow(t, m)
			if err := m.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
			p.block()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			call := m.Lock
			if c.try {
				call = m.TryLock
			}
			err = call(ctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrUnavailable) {
				t.Fatalf("%s while cut off: %v; want DeadlineExceeded and ErrUnavailable", c.name, err)
			}
			time.Sleep(c.block)
			p.unblock()
			eventually(t, 20*time.Second, "the abandoned create is cleaned up", func() bool {
				kp, _ := KeyPath(testPrefix, key)
				children, _, err := adm.Children(kp)
				// The server removes the key's container some time after
				// its last node went: no container is no node too.
				gone := err == nil || errors.Is(err, zk.ErrNoNode)
				return gone && len(children) == 0 && !d.clean.pending()
			})
			stayEmpty(t, adm, key, time.Second)
			lockNow(t, m)
			_ = m.Unlock(context.Background())
		})
	}
}

// The fencing token is the czxid, which keeps growing when the key's
// znode is deleted and made again, while the sequence suffix restarts.
func TestTokenSurvivesKeyNodeRecreation(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=2s")
	adm := admin(t, raw)
	_, l := lockerOn(t, raw)
	key := fmt.Sprintf("recreate/%d", time.Now().UnixNano())
	kp, _ := KeyPath(testPrefix, key)
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	var last dlock.Token
	for i := 0; i < 3; i++ {
		lockNow(t, m)
		seq, _ := seqOf(onlyNode(t, adm, key))
		if m.Token() <= last {
			t.Fatalf("round %d: token %d after %d", i, m.Token(), last)
		}
		if seq != 0 {
			t.Fatalf("round %d: sequence %d; want 0 in a fresh key node", i, seq)
		}
		last = m.Token()
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := adm.Delete(kp, -1); err != nil {
			t.Fatalf("delete key node: %v", err)
		}
	}
}

// go-zookeeper's zk.Lock on KeyPath shares the queue with dlock.
func TestInteroperatesWithZkLock(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=2s")
	adm := admin(t, raw)
	_, l := lockerOn(t, raw)
	key := fmt.Sprintf("interop/%d", time.Now().UnixNano())
	kp, _ := KeyPath(testPrefix, key)
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	zl := zk.NewLock(adm, kp, zk.WorldACL(zk.PermAll))
	if err := zl.Lock(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while zk.Lock holds: %v; want ErrNotAcquired", err)
	}
	got := make(chan error, 1)
	go func() { got <- m.Lock(ctx) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-got:
		t.Fatalf("Lock returned while zk.Lock holds: %v", err)
	default:
	}
	if err := zl.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Lock after zk.Lock's Unlock: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- zk.NewLock(adm, kp, zk.WorldACL(zk.PermAll)).Lock() }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("zk.Lock returned while dlock holds: %v", err)
	default:
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("zk.Lock after dlock's Unlock: %v", err)
	}
}
