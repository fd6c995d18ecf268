package zookeeper

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// session is what a server granted in its reply to a connect request.
type session struct {
	id      int64
	timeout time.Duration
	passwd  []byte
}

// observedConn passes a ZooKeeper client connection through unchanged and
// decodes the first frame the server sends on it, the connect response,
// for the session timeout the server negotiated: go-zookeeper uses it but
// does not expose it, and the lease logic must not assume the requested
// one (the server clamps it to its minimum and maximum). On a connection
// that resumed its session it also holds the answers back until
// go-zookeeper has set its watches again (replyGate).
type observedConn struct {
	net.Conn
	onSession func(session)
	buf       []byte
	done      bool
	wrote     bool       // the connect request went out
	asked     int64      // the session the connect request asked to resume
	gate      *replyGate // set by the handshake when the session resumed
}

// Read is called by one go-zookeeper goroutine at a time (the handshake,
// then the receive loop that it starts), so buf needs no lock.
func (c *observedConn) Read(p []byte) (int, error) {
	if c.gate != nil {
		c.gate.wait()
	}
	n, err := c.Conn.Read(p)
	if !c.done && n > 0 {
		c.feed(p[:n])
	}
	return n, err
}

// Write is called by one go-zookeeper goroutine at a time (the handshake,
// then the send loop that it starts): the first frame is the connect
// request, whose session id is at offset 20 (after the length, the
// protocol version, the last zxid and the timeout).
func (c *observedConn) Write(p []byte) (int, error) {
	if !c.wrote {
		c.wrote = true
		if len(p) >= 28 {
			c.asked = int64(binary.BigEndian.Uint64(p[20:]))
		}
	} else if c.gate != nil {
		c.gate.sent(p)
	}
	return c.Conn.Write(p)
}

// Close lets a receive loop held by the gate read the closed connection's
// error.
func (c *observedConn) Close() error {
	if g := c.gate; g != nil {
		g.release()
	}
	return c.Conn.Close()
}

// feed collects the connect response: a 4-byte length, then
// protocolVersion int32, timeOut int32, sessionId int64, passwd (int32
// length + bytes), and in newer servers a readOnly byte.
func (c *observedConn) feed(p []byte) {
	c.buf = append(c.buf, p...)
	if len(c.buf) < 4 {
		return
	}
	n := int(binary.BigEndian.Uint32(c.buf))
	if n < 20 || n > 256 { // not a connect response: stop looking
		c.done, c.buf = true, nil
		return
	}
	if len(c.buf) < 4+n {
		return
	}
	body := c.buf[4 : 4+n]
	s := session{
		timeout: time.Duration(int32(binary.BigEndian.Uint32(body[4:]))) * time.Millisecond,
		id:      int64(binary.BigEndian.Uint64(body[8:])),
	}
	if pl := int(int32(binary.BigEndian.Uint32(body[16:]))); pl > 0 && 20+pl <= n {
		s.passwd = append([]byte(nil), body[20:20+pl]...)
	}
	c.done, c.buf = true, nil
	if s.id != 0 && s.id == c.asked {
		c.gate = newReplyGate(replyFallback)
	}
	if s.id != 0 && s.timeout > 0 {
		c.onSession(s)
	}
}

// dialer returns a go-zookeeper Dialer whose connections report each
// session the server grants.
func dialer(onSession func(session)) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &observedConn{Conn: c, onSession: onSession}, nil
	}
}

type discardLogger struct{}

func (discardLogger) Printf(string, ...any) {}

// dial connects to servers and waits until the first session is granted,
// ctx ends or wait runs out. onSession sees every session granted over the
// connection's life; onEvent every state change.
func dial(ctx context.Context, servers []string, timeout, wait time.Duration,
	onSession func(session), onEvent func(zk.Event)) (*zk.Conn, session, error) {
	var (
		mu    sync.Mutex
		first session
		got   = make(chan struct{})
		once  sync.Once
	)
	conn, _, err := zk.Connect(servers, timeout,
		zk.WithLogger(discardLogger{}),
		zk.WithLogInfo(false),
		zk.WithDialer(dialer(func(s session) {
			mu.Lock()
			if first.id == 0 {
				first = s
			}
			mu.Unlock()
			onSession(s)
		})),
		zk.WithEventCallback(func(ev zk.Event) {
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				once.Do(func() { close(got) })
			}
			onEvent(ev)
		}))
	if err != nil {
		return nil, session{}, fmt.Errorf("%w: %v", driver.ErrInvalidURL, err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-got:
		mu.Lock()
		defer mu.Unlock()
		return conn, first, nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = fmt.Errorf("no session within connect_timeout %v", wait)
	}
	go conn.Close() // it may wait a second for a server that never answers
	return nil, session{}, driver.Unavailable(fmt.Errorf("zookeeper: connecting to %v: %w", servers, err))
}
