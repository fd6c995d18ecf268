package zookeeper

import (
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkConn is the go-zookeeper Conn a driver sends its requests on, counting
// the requests in flight so that Close can let them be answered before it
// closes the connection.
//
// go-zookeeper lets a request that Conn.Close ends return while its
// receiver may still be decoding the server's answer into the request's
// response (a data race, and a result read half-written). A request whose
// caller stopped waiting (call, on a cancelled context) is still in flight;
// so may be one a background goroutine just sent. Counting them at the one
// place every request goes through covers both, where a barrier request
// sent by Close covered only the requests sent before it.
type zkConn struct {
	*zk.Conn
	reqs flights
}

// tracked runs one request on c, counted as in flight, unless c is
// closing: then it fails with zk.ErrConnectionClosed, as a request sent
// after Conn.Close does.
func tracked[T any](c *zkConn, f func() (T, error)) (T, error) {
	if !c.reqs.enter() {
		var zero T
		return zero, zk.ErrConnectionClosed
	}
	defer c.reqs.leave()
	return f()
}

func (c *zkConn) Children(path string) ([]string, *zk.Stat, error) {
	r, err := tracked(c, func() (reply, error) {
		ch, st, err := c.Conn.Children(path)
		return reply{children: ch, stat: st}, err
	})
	return r.children, r.stat, err
}

func (c *zkConn) ChildrenW(path string) ([]string, *zk.Stat, <-chan zk.Event, error) {
	r, err := tracked(c, func() (reply, error) {
		ch, st, ev, err := c.Conn.ChildrenW(path)
		return reply{children: ch, stat: st, ev: ev}, err
	})
	return r.children, r.stat, r.ev, err
}

func (c *zkConn) Exists(path string) (bool, *zk.Stat, error) {
	r, err := tracked(c, func() (reply, error) {
		ok, st, err := c.Conn.Exists(path)
		return reply{stat: st, ok: ok}, err
	})
	return r.ok, r.stat, err
}

func (c *zkConn) ExistsW(path string) (bool, *zk.Stat, <-chan zk.Event, error) {
	r, err := tracked(c, func() (reply, error) {
		ok, st, ev, err := c.Conn.ExistsW(path)
		return reply{stat: st, ev: ev, ok: ok}, err
	})
	return r.ok, r.stat, r.ev, err
}

func (c *zkConn) Get(path string) ([]byte, *zk.Stat, error) {
	r, err := tracked(c, func() (reply, error) {
		data, st, err := c.Conn.Get(path)
		return reply{stat: st, data: data}, err
	})
	return r.data, r.stat, err
}

func (c *zkConn) Sync(path string) (string, error) {
	return tracked(c, func() (string, error) { return c.Conn.Sync(path) })
}

func (c *zkConn) Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	return tracked(c, func() (string, error) { return c.Conn.Create(path, data, flags, acl) })
}

func (c *zkConn) CreateContainer(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	return tracked(c, func() (string, error) { return c.Conn.CreateContainer(path, data, flags, acl) })
}

func (c *zkConn) Set(path string, data []byte, version int32) (*zk.Stat, error) {
	return tracked(c, func() (*zk.Stat, error) { return c.Conn.Set(path, data, version) })
}

func (c *zkConn) Delete(path string, version int32) error {
	_, err := tracked(c, func() (struct{}, error) { return struct{}{}, c.Conn.Delete(path, version) })
	return err
}

func (c *zkConn) Multi(ops ...any) ([]zk.MultiResponse, error) {
	return tracked(c, func() ([]zk.MultiResponse, error) { return c.Conn.Multi(ops...) })
}

// reply carries the results of one request through tracked.
type reply struct {
	children []string
	stat     *zk.Stat
	ev       <-chan zk.Event
	ok       bool
	data     []byte
}

// drain stops new requests and waits, for at most wait, until none is in
// flight. It reports whether none was left. A request left in flight (a
// server that stopped answering) is ended by the close that follows.
func (c *zkConn) drain(wait time.Duration) bool { return c.reqs.drain(wait) }

// flights counts requests in flight; once draining, it admits no more.
type flights struct {
	mu       sync.Mutex
	n        int
	draining bool
	idle     chan struct{} // closed when n reaches 0 while draining
}

func (f *flights) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.draining {
		return false
	}
	f.n++
	return true
}

func (f *flights) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

func (f *flights) drain(wait time.Duration) bool {
	f.mu.Lock()
	f.draining = true
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-idle:
		return true
	case <-t.C:
		return false
	}
}
