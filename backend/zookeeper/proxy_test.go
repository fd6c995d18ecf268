package zookeeper

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// proxy forwards TCP connections on loopback to a server and can cut them
// off: while blocked it neither reads nor writes, so bytes wait in the
// kernel's buffers, as on a partitioned network, and nothing is lost or
// reordered when it is unblocked.
type proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	blocked bool
	open    chan struct{} // closed while not blocked
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	return newProxyAt(t, "127.0.0.1:0", target)
}

// newProxyAt is newProxy listening on a given loopback address.
func newProxyAt(t testing.TB, listen, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, open: make(chan struct{})}
	close(p.open)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blocked {
		p.blocked = true
		p.open = make(chan struct{})
	}
}

func (p *proxy) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked {
		p.blocked = false
		close(p.open)
	}
}

// gate returns a channel that is closed while the proxy is not blocked.
func (p *proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			<-p.gate()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				return
			}
			p.track(up)
			p.wg.Add(2)
			go p.pipe(c, up)
			go p.pipe(up, c)
		}()
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32*1024)
	for {
		<-p.gate()
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.unblock()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// killSession ends a session from outside, as Curator's KillSession does:
// it connects with the session's ID and password, which moves the session
// to this connection, and closes it. The server deletes the session's
// ephemeral nodes; the client learns that its session expired when it
// reconnects.
func killSession(addr string, s session) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	// ConnectRequest: protocolVersion int32, lastZxidSeen int64, timeOut
	// int32, sessionId int64, passwd buffer.
	body := binary.BigEndian.AppendUint32(nil, 0)
	body = binary.BigEndian.AppendUint64(body, 0)
	body = binary.BigEndian.AppendUint32(body, uint32(s.timeout.Milliseconds()))
	body = binary.BigEndian.AppendUint64(body, uint64(s.id))
	body = binary.BigEndian.AppendUint32(body, uint32(len(s.passwd)))
	body = append(body, s.passwd...)
	if err := writeFrame(c, body); err != nil {
		return err
	}
	resp, err := readFrame(c)
	if err != nil {
		return err
	}
	if len(resp) < 16 || int64(binary.BigEndian.Uint64(resp[8:])) != s.id {
		return fmt.Errorf("server did not give back session 0x%x", s.id)
	}
	// RequestHeader: xid int32, type int32 (closeSession = -11).
	req := binary.BigEndian.AppendUint32(nil, 1)
	req = binary.BigEndian.AppendUint32(req, uint32(0xfffffff5))
	if err := writeFrame(c, req); err != nil {
		return err
	}
	// ReplyHeader: xid int32, zxid int64, err int32.
	reply, err := readFrame(c)
	if err != nil {
		return err
	}
	if len(reply) < 16 || binary.BigEndian.Uint32(reply[12:]) != 0 {
		return fmt.Errorf("closeSession failed: reply %x", reply)
	}
	return nil
}

func writeFrame(w io.Writer, body []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(r, body)
	return body, err
}
