package postgres

import (
	"net"
	"sync"
	"testing"
	"time"
)

// dropProxy forwards TCP connections on loopback to a server and can drop
// them all at once, as a server restart or a broken network does: drop
// closes every open connection and makes new ones fail until restore.
// block holds every byte instead, connections open, as a partition does.
// holdReplies holds what the server sends on the connections open now,
// and slowDials delays new connections, as a link that stalls does.
type dropProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	gate    chan struct{}     // closed while bytes flow
	replies chan struct{}     // closed while held replies flow
	servers map[net.Conn]bool // the server sides; true: replies held
	delay   time.Duration     // before each new connection
	down    bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	stopped bool
}

func newDropProxy(t testing.TB, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, servers: map[net.Conn]bool{},
		gate: make(chan struct{}), replies: make(chan struct{})}
	close(p.gate)
	close(p.replies)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *dropProxy) addr() string { return p.ln.Addr().String() }

func (p *dropProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down || p.stopped {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		delay := p.delay
		p.mu.Unlock()
		time.Sleep(delay)
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.down || p.stopped {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			continue
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.servers[s] = false
		p.wg.Add(2)
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			defer p.wg.Done()
			defer dst.Close()
			defer src.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					p.mu.Lock()
					gate, replies := p.gate, p.replies
					if !p.servers[src] {
						replies = nil
					}
					p.mu.Unlock()
					<-gate
					if replies != nil {
						<-replies
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
		go pipe(c, s)
		go pipe(s, c)
	}
}

// drop closes every connection and refuses new ones until restore.
func (p *dropProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]struct{}{}
	p.servers = map[net.Conn]bool{}
}

// block holds every byte from now on, in both directions, until unblock.
func (p *dropProxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// holdReplies holds what the server sends on the connections open now,
// until releaseReplies; what clients send still flows, and so does every
// byte of connections opened later.
func (p *dropProxy) holdReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.replies:
		p.replies = make(chan struct{})
	default:
	}
	for s := range p.servers {
		p.servers[s] = true
	}
}

func (p *dropProxy) releaseReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.servers {
		p.servers[s] = false
	}
	select {
	case <-p.replies:
	default:
		close(p.replies)
	}
}

// slowDials makes every new connection wait d before it connects.
func (p *dropProxy) slowDials(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *dropProxy) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *dropProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

func (p *dropProxy) close() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.drop()
	p.unblock()
	p.releaseReplies()
	p.wg.Wait()
}
