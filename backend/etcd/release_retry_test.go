package etcd_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
)

// replyGate forwards TCP connections on loopback to a server and can hold
// every byte the server sends back, while the client's requests still
// reach the server: a request is applied and its answer is late, as on an
// overloaded machine or a slow link.
type replyGate struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	gate chan struct{} // closed while replies flow
	cut  bool          // hold holds the requests too
	wg   sync.WaitGroup
}

func newReplyGate(t *testing.T, target string) *replyGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &replyGate{ln: ln, target: target, gate: make(chan struct{})}
	close(g.gate)
	g.wg.Add(1)
	go g.accept()
	t.Cleanup(func() { g.open(); _ = ln.Close(); g.wg.Wait() })
	return g
}

func (g *replyGate) accept() {
	defer g.wg.Done()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", g.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		conns = append(conns, c, s)
		g.wg.Add(2)
		go g.pipe(s, c, false)
		go g.pipe(c, s, true)
	}
}

func (g *replyGate) pipe(dst, src net.Conn, gated bool) {
	defer g.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			g.mu.Lock()
			gated := gated || g.cut
			g.mu.Unlock()
			if gated {
				g.mu.Lock()
				gate := g.gate
				g.mu.Unlock()
				<-gate
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (g *replyGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cut = false
	g.shut()
}

// sever holds the bytes both ways: the server hears nothing more either,
// as behind a partition.
func (g *replyGate) sever() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cut = true
	g.shut()
}

// shut stops what the gate holds until open; g.mu held.
func (g *replyGate) shut() {
	select {
	case <-g.gate:
		g.gate = make(chan struct{})
	default:
	}
}

func (g *replyGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.gate:
	default:
		close(g.gate)
	}
}

// An Unlock whose delete the server applied but whose answer came after
// the attempt's bound is sent again, and the second attempt finds the
// entry gone: by the first attempt's own hand, while the hold's lease was
// alive. That is a release, not a lost lock (it used to be reported as
// ErrLockLost: "lock entry already gone").
func TestUnlockWhoseFirstAnswerIsLate(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	g := newReplyGate(t, e.cfg.Endpoints[0])
	ctx := ctxFor(t, time.Minute)
	cfg := e.cfg
	cfg.Endpoints = []string{g.ln.Addr().String()}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	l, err := etcdNew(cli, etcd.Config{Prefix: e.prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, err := l.NewMutex("late-reply", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	g.hold()
	done := make(chan error, 1)
	go func() { done <- m.Unlock(ctx) }()
	time.Sleep(1500 * time.Millisecond) // past the first attempt's bound (1s)
	g.open()
	if err := <-done; err != nil {
		t.Fatalf("Unlock = %v, want nil (errors.Is ErrLockLost: %v)", err, errors.Is(err, dlock.ErrLockLost))
	}
	resp, err := e.admin.Get(context.Background(), e.prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("%d entries left under the prefix after Unlock", len(resp.Kvs))
	}
}
