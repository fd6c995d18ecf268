package zookeeper

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// frameProxy forwards one client's connections to a server on loopback
// and counts the requests the client sends: ZooKeeper frames are a 4-byte
// length and a body.
type frameProxy struct {
	ln       net.Listener
	target   string
	frames   atomic.Int64
	accepted atomic.Int64
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
	gate  chan struct{} // set by hold
}

func newFrameProxy(t *testing.T, target string) *frameProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &frameProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.drop()
		p.wg.Wait()
	})
	return p
}

func (p *frameProxy) addr() string { return p.ln.Addr().String() }

// open counts the connections open now, both sides of each.
func (p *frameProxy) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// drop closes the connections open now; the client reconnects.
func (p *frameProxy) drop() {
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

// hold keeps the connections the proxy accepts from now on waiting,
// neither answered nor forwarded, until release is called (also at the
// test's end).
func (p *frameProxy) hold(t *testing.T) (release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	t.Cleanup(release)
	return release
}

func (p *frameProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		p.mu.Lock()
		gate := p.gate
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if gate != nil {
				<-gate
			}
			p.forward(c)
		}()
	}
}

// forward connects c to the target and copies both ways, counting the
// client's frames.
func (p *frameProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, up)
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer up.Close()
		_, _ = io.Copy(c, up)
	}()
	defer c.Close()
	var n [4]byte
	for {
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		p.frames.Add(1)
		if _, err := up.Write(append(n[:], body...)); err != nil {
			return
		}
	}
}

// holdMany locks n keys of its own through l.
func holdMany(t *testing.T, l *dlock.Locker, n int, prefix string) []*dlock.Mutex {
	t.Helper()
	ms := make([]*dlock.Mutex, n)
	for i := range ms {
		m, err := l.NewMutex(fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), i))
		if err != nil {
			t.Fatal(err)
		}
		lockNow(t, m)
		ms[i] = m
	}
	return ms
}

// requestsOver counts the requests the client sends over d.
func requestsOver(p *frameProxy, d time.Duration) int64 {
	f0 := p.frames.Load()
	time.Sleep(d)
	return p.frames.Load() - f0
}

// allHeld fails unless every Mutex still holds its lock.
func allHeld(t *testing.T, ms []*dlock.Mutex, skip int) {
	t.Helper()
	for i, m := range ms {
		if i == skip {
			continue
		}
		select {
		case <-m.Done():
			t.Fatalf("hold %d (%s) ended: %v", i, m.Key(), m.Err())
		default:
		}
	}
}

// A renewal round of many holds is one leader-ordered read, not one per
// hold: each hold's node watch vouches for it between rounds. A node
// deleted from outside still ends its hold, and the others stay held.
func TestRenewRoundReadsNotEveryHold(t *testing.T) {
	const n, T = 300, 3 * time.Second
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	adm := admin(t, raw)
	p := newFrameProxy(t, hosts(t, raw)[0])
	_, l := lockerOn(t, "zk://"+p.addr()+testPrefix+"?session_timeout="+T.String())
	ms := holdMany(t, l, n, "round")
	// Two renewal rounds (every driver.RenewInterval), heartbeats (every
	// T/10) and pings. One read per hold per round would be 2 requests per
	// hold per round.
	round := driver.RenewInterval(T)
	got := requestsOver(p, 2*round+round/2)
	t.Logf("%d requests over two renewal rounds of %d holds", got, n)
	if got >= n/2 {
		t.Fatalf("%d requests over two renewal rounds of %d holds; want fewer than %d", got, n, n/2)
	}
	allHeld(t, ms, -1)

	victim := ms[n/2]
	if err := adm.Delete(onlyNode(t, adm, victim.Key()), -1); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, victim.Done(), T, "the hold whose node was deleted ends")
	time.Sleep(2 * round)
	allHeld(t, ms, n/2)
	for i, m := range ms {
		if i != n/2 {
			if err := m.Unlock(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// After the connection moved (a session event), the watches may not be
// set again on the server yet: the next round reads each hold, and sets
// its watch, and the rounds after it are one read again. The session
// timeout leaves the reconnection time to finish well before the monitor
// would give the holds up (half of it).
func TestRenewRoundAfterReconnectReadsEachHoldOnce(t *testing.T) {
	const n, T = 100, 8 * time.Second
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	p := newFrameProxy(t, hosts(t, raw)[0])
	d, l := lockerOn(t, "zk://"+p.addr()+testPrefix+"?session_timeout="+T.String())
	ms := holdMany(t, l, n, "reconnect")
	sid := d.conn.SessionID()
	e := d.nodes.current()
	f0 := p.frames.Load() // a round retried at once on reconnection counts too
	p.drop()
	eventually(t, T/2, "the client reconnects", func() bool {
		return d.nodes.current() != e && d.conn.State() == zk.StateHasSession
	})
	round := driver.RenewInterval(T)
	time.Sleep(round + round/2)
	first := p.frames.Load() - f0
	next := requestsOver(p, 2*round)
	if d.conn.SessionID() != sid {
		t.Fatalf("session 0x%x after the reconnection; want 0x%x", d.conn.SessionID(), sid)
	}
	allHeld(t, ms, -1)
	t.Logf("%d requests in the round after a reconnection, %d over the two after that", first, next)
	if first < n {
		t.Fatalf("%d requests in the round after a reconnection; want at least one per hold (%d)", first, n)
	}
	if next >= n/2 {
		t.Fatalf("%d requests over the two rounds after that; want fewer than %d", next, n/2)
	}
}
