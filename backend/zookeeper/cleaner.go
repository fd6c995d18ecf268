package zookeeper

import (
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// cleaner deletes, in the background and until it succeeds, the nodes that
// a request may have left behind: the node of a waiter whose context ended
// while the delete could not be sent, the node of a lost hold whose session
// may still be alive, and the node of a create whose reply never came,
// which is found again by the GUID in its name. A node that belongs to a
// session that has ended is gone already and is dropped from the list.
type cleaner struct {
	d    *zkDriver
	kick chan struct{}

	mu       sync.Mutex
	nodes    map[string]int64     // node path -> owning session, 0 if unknown
	guids    map[guidRef]struct{} // creates whose outcome is unknown
	inflight int                  // abandoned creates still waiting for a reply
}

type guidRef struct{ keyPath, guid string }

func newCleaner(d *zkDriver) *cleaner {
	return &cleaner{d: d, kick: make(chan struct{}, 1), nodes: map[string]int64{}, guids: map[guidRef]struct{}{}}
}

func (c *cleaner) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// node asks for path, owned by session sid (0 if unknown), to be deleted.
func (c *cleaner) node(path string, sid int64) {
	c.mu.Lock()
	c.nodes[path] = sid
	c.mu.Unlock()
	c.poke()
}

// guid asks for any node of keyPath carrying guid to be deleted.
func (c *cleaner) guid(keyPath, guid string) {
	c.mu.Lock()
	c.guids[guidRef{keyPath, guid}] = struct{}{}
	c.mu.Unlock()
	c.poke()
}

// abandoned takes over a create whose caller stopped waiting: whatever it
// made is deleted once its outcome is known.
func (c *cleaner) abandoned(keyPath, guid string, res <-chan createResult) {
	c.mu.Lock()
	c.inflight++
	c.mu.Unlock()
	c.d.wg.Add(1)
	go func() {
		defer c.d.wg.Done()
		r := <-res
		switch {
		case r.err == nil:
			c.node(r.path, 0)
		case ambiguous(r.err):
			c.guid(keyPath, guid)
		}
		c.mu.Lock()
		c.inflight--
		c.mu.Unlock()
	}()
}

// ambiguous reports whether a failed request may nevertheless have been
// applied: it was sent, and the connection broke before the reply.
func ambiguous(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed)
}

// pending reports whether anything is left to clean up, or may be.
func (c *cleaner) pending() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)+len(c.guids)+c.inflight > 0
}

func (c *cleaner) run() {
	defer c.d.wg.Done()
	retry := time.NewTimer(time.Hour)
	defer retry.Stop()
	for {
		var rc <-chan time.Time
		if c.queued() {
			retry.Reset(min(max(c.d.sessionTimeout()/10, 50*time.Millisecond), time.Second))
			rc = retry.C
		}
		select {
		case <-c.d.closed:
			return
		case <-c.kick:
		case <-rc:
		}
		retry.Stop()
		c.pass()
	}
}

// closeCleanTimeout bounds the deletions Close makes on a caller's Conn.
const closeCleanTimeout = 5 * time.Second

// flush retries every pending deletion, and waits for abandoned creates to
// report, until nothing is left or deadline passes.
func (c *cleaner) flush(deadline time.Time) {
	for c.pending() && time.Now().Before(deadline) {
		c.pass()
		if c.pending() {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// queued reports whether deletions wait for a retry.
func (c *cleaner) queued() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.nodes)+len(c.guids) > 0
}

// pass tries every pending deletion once.
func (c *cleaner) pass() {
	c.mu.Lock()
	nodes := make(map[string]int64, len(c.nodes))
	for p, sid := range c.nodes {
		nodes[p] = sid
	}
	guids := make([]guidRef, 0, len(c.guids))
	for g := range c.guids {
		guids = append(guids, g)
	}
	c.mu.Unlock()

	for path, sid := range nodes {
		if c.d.isClosed() {
			return
		}
		if sid == 0 || sid == c.d.conn.SessionID() {
			if err := c.d.conn.Delete(path, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				continue
			}
		}
		c.mu.Lock()
		if c.nodes[path] == sid {
			delete(c.nodes, path)
		}
		c.mu.Unlock()
	}
	for _, g := range guids {
		if c.d.isClosed() {
			return
		}
		if !c.sweep(g) {
			continue
		}
		c.mu.Lock()
		delete(c.guids, g)
		c.mu.Unlock()
	}
}

// sweep deletes every child of g.keyPath carrying g.guid. It reports
// whether it is done: the listing worked and every such node is gone.
func (c *cleaner) sweep(g guidRef) bool {
	// Sync first: the server we reconnected to may not yet have applied a
	// create that the leader committed.
	if _, err := c.d.conn.Sync(g.keyPath); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return false
	}
	children, _, err := c.d.conn.Children(g.keyPath)
	if errors.Is(err, zk.ErrNoNode) {
		return true
	}
	if err != nil {
		return false
	}
	done := true
	for _, name := range children {
		if hasGUID(name, g.guid) {
			if err := c.d.conn.Delete(g.keyPath+"/"+name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				done = false
			}
		}
	}
	return done
}
