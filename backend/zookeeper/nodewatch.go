package zookeeper

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// nodeWatches routes the watch events of the holds' nodes to the holds,
// with no goroutine per hold. go-zookeeper delivers each watch on a
// channel of its own, which only a goroutine per hold could wait on; it
// also passes every event to the connection's event callback, which a
// connection dialled by Open has (see dialDriver). So a hold registers its
// node's path here, and the callback finds it. A Locker over a caller's
// Conn has no callback, and waits on each hold's channel instead (watch).
//
// The watch on our node is set by the Exists that goes out with the
// grant's listing, before the hold exists: expect registers the path
// first, and an event that comes before attach is kept for it.
//
// The watches also let a renewal round skip the per-hold reads: see
// renewbatch.go. For that, epoch counts the connection's session events
// (a disconnection, a reconnection): a watch set and answered within one
// epoch is known to be on the server, and every event of its node comes
// before the answer to any later request of that epoch.
type nodeWatches struct {
	epoch atomic.Uint64

	mu    sync.Mutex
	holds map[string]*zkHold  // node path -> its hold
	early map[string]zk.Event // node path expected -> its first event before the hold came (Type 0: none)
}

func newNodeWatches() *nodeWatches {
	w := &nodeWatches{holds: map[string]*zkHold{}, early: map[string]zk.Event{}}
	w.epoch.Store(1)
	return w
}

// current is the connection's epoch; 0 over a caller's Conn (no events).
func (w *nodeWatches) current() uint64 {
	if w == nil {
		return 0
	}
	return w.epoch.Load()
}

// session moves to a new epoch: called for every session event, before
// the requests that follow it are answered.
func (w *nodeWatches) session() {
	if w != nil {
		w.epoch.Add(1)
	}
}

// expect registers path before its watch is set.
func (w *nodeWatches) expect(path string) {
	w.mu.Lock()
	w.early[path] = zk.Event{}
	w.mu.Unlock()
}

// forget drops an expected path that no hold came for.
func (w *nodeWatches) forget(path string) {
	w.mu.Lock()
	delete(w.early, path)
	w.mu.Unlock()
}

// attach gives path's events to h from now on, and returns an event that
// came before, if one did.
func (w *nodeWatches) attach(path string, h *zkHold) (zk.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := w.early[path]
	delete(w.early, path)
	w.holds[path] = h
	return ev, ev.Type != 0
}

func (w *nodeWatches) detach(path string, h *zkHold) {
	w.mu.Lock()
	if w.holds[path] == h {
		delete(w.holds, path)
	}
	w.mu.Unlock()
}

// all returns every hold attached.
func (w *nodeWatches) all() []*zkHold {
	w.mu.Lock()
	defer w.mu.Unlock()
	hs := make([]*zkHold, 0, len(w.holds))
	for _, h := range w.holds {
		hs = append(hs, h)
	}
	return hs
}

// event is called by go-zookeeper's receive loop for every event: it must
// not block, so a hold's handling runs in a goroutine of its own (a
// re-watch sends a request, whose answer that loop delivers).
func (w *nodeWatches) event(ev zk.Event) {
	if ev.Type == zk.EventSession || ev.Path == "" {
		return
	}
	w.mu.Lock()
	h := w.holds[ev.Path]
	if h == nil {
		if first, ok := w.early[ev.Path]; ok && first.Type == 0 {
			w.early[ev.Path] = ev
		}
	}
	w.mu.Unlock()
	if h != nil {
		h.disarm()
		go h.nodeEvent(ev)
	}
}

// nodeEvent handles one event of the hold's node: its deletion, or the
// session's end, loses the hold; another change (an operator set data on
// the node) sets the watch again.
func (h *zkHold) nodeEvent(ev zk.Event) (again <-chan zk.Event, ended bool) {
	switch ev.Type {
	case zk.EventNodeDeleted:
		h.lose(errors.New("node deleted"), false)
		return nil, true
	case zk.EventNotWatching:
		h.lose(fmt.Errorf("session ended: %w", ev.Err), false)
		return nil, true
	}
	if h.isEnded() {
		return nil, true
	}
	ok, st, next, err := h.d.conn.ExistsW(h.path)
	switch {
	case err != nil:
		h.lose(fmt.Errorf("cannot watch the node again: %w", err), true)
		return nil, true
	case !ok || st.EphemeralOwner != h.sid:
		h.lose(errors.New("node deleted"), false)
		return nil, true
	}
	return next, false
}

// watch waits on the hold's watch channel, for a Locker whose connection
// has no event callback (nodeWatches).
func (h *zkHold) watch(ch <-chan zk.Event) {
	defer h.d.wg.Done()
	for {
		select {
		case <-h.done:
			return
		case <-h.d.closed:
			h.lose(driver.ErrClosed, false)
			return
		case ev := <-ch:
			next, ended := h.nodeEvent(ev)
			if ended {
				return
			}
			ch = next
		}
	}
}
