package conformance

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
)

// Link is a client's way to its store, which a test can cut as a
// partition does.
type Link interface {
	// Cut holds everything the client and the store send each other from
	// now on, with the connections left open: requests go unanswered and
	// nothing tells the client.
	Cut()
	// Heal ends the cut: the connections that were held are closed (the
	// client reconnects) and new ones are forwarded again.
	Heal()
}

// Proxy forwards TCP connections from a loopback address to a server, and
// can cut them off (Link). It is closed when the test ends.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cut   bool
	cond  *sync.Cond // signalled when cut ends
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewProxy starts a proxy on 127.0.0.1 to upstream, a host:port.
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("NewProxy: %v", err)
	}
	p := &Proxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies from src to dst, holding what it read while the link is cut.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.cut {
				p.cond.Wait()
			}
			_, live := p.conns[src]
			p.mu.Unlock()
			if !live {
				return
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

// Cut implements Link.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
}

// Heal implements Link.
func (p *Proxy) Heal() {
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
	p.cut = false
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.Heal()
	p.wg.Wait()
}

// Proxies is a Link over several proxies: one per server of a store.
type Proxies []*Proxy

// Cut implements Link.
func (ps Proxies) Cut() {
	for _, p := range ps {
		p.Cut()
	}
}

// Heal implements Link.
func (ps Proxies) Heal() {
	for _, p := range ps {
		p.Heal()
	}
}

// ProxyURL puts a proxy before every host of a backend URL
// ("redlock://a:1,b:2", "postgres://u:p@h:5432/db") and returns the URL
// with the proxies in their place, and the Link that cuts them all.
func ProxyURL(t testing.TB, rawURL string) (string, Link) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("ProxyURL: %v", err)
	}
	var (
		ps    Proxies
		hosts []string
	)
	for _, h := range strings.Split(u.Host, ",") {
		p := NewProxy(t, h)
		ps = append(ps, p)
		hosts = append(hosts, p.Addr())
	}
	u.Host = strings.Join(hosts, ",")
	return u.String(), ps
}

// CutOffURL is a Harness.CutOff for a backend whose URL names every server
// a client talks to: it opens the URL with a proxy before each of them.
func CutOffURL(rawURL string) func(t testing.TB, ctx context.Context, opts ...dlock.Option) (*dlock.Locker, Link, error) {
	return func(t testing.TB, ctx context.Context, opts ...dlock.Option) (*dlock.Locker, Link, error) {
		u, link := ProxyURL(t, rawURL)
		l, err := dlock.Open(ctx, u, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("opening %s through proxies: %w", rawURL, err)
		}
		return l, link, nil
	}
}
