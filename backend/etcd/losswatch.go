package etcd

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// lossWatch is the one watch through which a Locker learns that the entry
// of any of its holds was deleted by someone other than its Release (lease
// expiry or revocation, an operator's delete): a single deletion watch on
// the Locker's prefix, not one watch and goroutine per hold.
//
// The watch runs only while a hold needs it. It starts once a hold has
// been held for lazyWatch, from the create revision of the oldest hold
// registered, so that it reports every deletion of their entries, those
// before it existed included; and it stops once no hold has been
// registered for lossLinger. A watch on the prefix receives the deletion
// of every entry under it, every other Locker's releases included: kept
// for ever, it cost each of N processes contending for a key an event per
// handoff, N per acquisition on the server (32 worker processes reached
// half the acquisitions per second without it). Short holds now never
// start it: a hold released within lazyWatch learns of a deletion from its
// Release instead (ErrNotHeld), as it would have had the deletion come a
// moment later.
//
// A broken watch (compaction, no leader) is replaced after one read of the
// prefix: every registered hold whose entry that read does not show, and
// was created by its revision, is lost (one granted while the read was on
// its way is not in it), and the new watch starts after the read's
// revision, so no deletion falls between the two.
//
// The watch runs on a gRPC stream of its own (drv.lossCtx), so that a
// progress request (caughtUp) is answered for it alone: etcd answers one
// only when every watch on the stream has caught up.
type lossWatch struct {
	d *drv

	mu      sync.Mutex
	holds   map[string]*hold // by entry key
	started bool             // a run goroutine watches (or is about to)
	armed   bool             // a lazy start is pending (startLater)
	idling  *time.Timer      // a pending idle stop (stopIfIdle), nil when none
	stopped bool             // the current watch was cancelled for idleness
	cancel  context.CancelFunc
	from    int64 // the watch reports every deletion from this revision on; 0 until it runs
	// progress is a revision up to which every deletion has been handled
	// (a progress notification, or a resync's read); moved is closed and
	// replaced when it grows.
	progress int64
	moved    chan struct{}
}

// lossLinger is how long the loss watch outlives the last hold it covers.
const lossLinger = time.Second

func newLossWatch(d *drv) *lossWatch {
	return &lossWatch{d: d, holds: map[string]*hold{}, moved: make(chan struct{})}
}

// advance records that every deletion up to rev has been handled.
func (w *lossWatch) advance(rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rev > w.progress {
		w.progress = rev
		close(w.moved)
		w.moved = make(chan struct{})
	}
}

// caughtUp asks the server for a progress notification and reports
// whether the watch has handled every deletion up to revision rev before
// ctx ends: then a hold still registered had its entry at rev. False
// tells nothing (the watch is behind, broken or being replaced, or the
// server did not answer); the caller reads the entries instead.
func (w *lossWatch) caughtUp(ctx context.Context, rev int64) bool {
	w.mu.Lock()
	p, started := w.progress, w.started
	w.mu.Unlock()
	if !started {
		return false
	}
	if p < rev {
		// Its context must carry the watch's metadata: that picks the
		// stream the request goes on.
		rctx, cancel := context.WithCancel(w.d.lossCtx)
		stop := context.AfterFunc(ctx, cancel)
		err := w.d.cli.RequestProgress(rctx)
		stop()
		cancel()
		if err != nil {
			return false
		}
	}
	for {
		w.mu.Lock()
		p, moved := w.progress, w.moved
		w.mu.Unlock()
		if p >= rev {
			return true
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
}

// registered reports whether h is still watched: neither released nor
// lost.
func (w *lossWatch) registered(h *hold) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holds[h.key] == h
}

// add registers h. If the watch is not running, it starts once a
// registered hold has lasted lazyWatch (startLater).
// An entry created before the running watch's start revision (a waiter's,
// granted after the watch began) is checked once by a read: a deletion
// between its creation and the watch's start would otherwise go unseen.
func (w *lossWatch) add(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h.registered = time.Now()
	w.holds[h.key] = h
	if !w.started {
		if !w.armed {
			w.armed = true
			w.d.watchers.Add(1)
			go w.startLater()
		}
		return
	}
	if h.rev+1 < w.from && !w.stopped {
		w.d.watchers.Add(1)
		go w.check(h)
	}
}

// startLater starts the watch once a registered hold has been held for
// lazyWatch, unless no hold is registered by then. It asks the age of a hold,
// not only whether one is registered: a Locker whose holds come and go
// faster than lazyWatch (a tight Lock/Unlock loop) has one registered at
// most instants, and would otherwise keep a watch that streams it every
// deletion under its prefix, its own releases included, though none of
// those holds ever needs it.
func (w *lossWatch) startLater() {
	defer w.d.watchers.Done()
	t := time.NewTimer(lazyWatch)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.d.ctx.Done():
		}
		w.mu.Lock()
		if w.started || len(w.holds) == 0 || w.d.ctx.Err() != nil {
			w.armed = false
			w.mu.Unlock()
			return
		}
		if wait := lazyWatch - time.Since(w.oldest()); wait > 0 {
			// The holds that would have needed it have ended: wait
			// for the oldest of those registered now.
			w.mu.Unlock()
			t.Reset(wait)
			continue
		}
		w.armed = false
		w.started = true
		from := w.restartFrom()
		w.d.watchers.Add(1)
		go w.run(from)
		w.mu.Unlock()
		return
	}
}

// oldest returns when the longest registered hold was registered. w.mu
// held, with a hold registered.
func (w *lossWatch) oldest() time.Time {
	var first time.Time
	for _, h := range w.holds {
		if first.IsZero() || h.registered.Before(first) {
			first = h.registered
		}
	}
	return first
}

// restartFrom sets the revision a new watch starts from: the oldest
// registered hold's creation, so that the watch reports every deletion of
// the entries it covers. Nothing after it has been handled yet. w.mu held,
// with a hold registered.
func (w *lossWatch) restartFrom() int64 {
	from := int64(0)
	for _, h := range w.holds {
		if from == 0 || h.rev+1 < from {
			from = h.rev + 1
		}
	}
	w.from = from
	w.progress = min(w.progress, from-1)
	return from
}

// remove unregisters h (released).
func (w *lossWatch) remove(h *hold) {
	w.mu.Lock()
	if w.holds[h.key] == h {
		delete(w.holds, h.key)
		w.idleLater()
	}
	w.mu.Unlock()
}

// idleLater schedules a stop of the watch when no hold is registered.
// w.mu held.
func (w *lossWatch) idleLater() {
	if len(w.holds) > 0 || !w.started || w.idling != nil {
		return
	}
	w.idling = time.AfterFunc(lossLinger, w.stopIfIdle)
}

// stopIfIdle cancels the watch if no hold has been registered since
// idleLater (or one came and went: it checks the state, not the history).
func (w *lossWatch) stopIfIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idling = nil
	if len(w.holds) > 0 || !w.started || w.stopped || w.cancel == nil {
		return
	}
	w.stopped = true
	w.cancel()
}

// deleted marks the hold of key lost if the deletion at rev is of its
// incarnation (names are reused: an older deletion ended an older hold).
func (w *lossWatch) deleted(key string, rev int64) {
	w.mu.Lock()
	h := w.holds[key]
	if h != nil && rev > h.rev {
		delete(w.holds, key)
		w.idleLater()
	} else {
		h = nil
	}
	w.mu.Unlock()
	if h != nil {
		w.d.forget(h)
		if h.lease().shared {
			h.lease().untrack(h)
		}
		h.lost.Mark()
	}
}

// check reads h's entry once and marks it lost if it is gone.
func (w *lossWatch) check(h *hold) {
	defer w.d.watchers.Done()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if h.ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(h.ctx, max(h.ttl()/3, time.Second))
		resp, err := w.d.cli.Get(ctx, h.key, clientv3.WithKeysOnly())
		cancel()
		if err == nil {
			if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != h.rev {
				w.deleted(h.key, h.rev+1)
			}
			return
		}
		select {
		case <-time.After(backoff):
		case <-h.ctx.Done():
			return
		}
	}
}

// run watches the prefix for deletions from revision from on, replacing
// the watch when it breaks, until Close or until it is stopped for
// idleness with no hold registered.
func (w *lossWatch) run(from int64) {
	defer w.d.watchers.Done()
	for {
		ctx, cancel := context.WithCancel(w.d.lossCtx)
		w.mu.Lock()
		w.cancel = cancel
		w.mu.Unlock()
		ch := w.d.cli.Watch(ctx, w.d.prefix, clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithRev(from))
		for wr := range ch {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE {
					w.deleted(string(ev.Kv.Key), ev.Kv.ModRevision)
				}
			}
			if wr.IsProgressNotify() {
				w.advance(wr.Header.Revision)
			}
		}
		cancel()
		if w.d.ctx.Err() != nil {
			w.mu.Lock()
			if w.idling != nil {
				w.idling.Stop() // Close: no stop is needed
				w.idling = nil
			}
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		if w.stopped {
			w.stopped, w.cancel = false, nil
			if len(w.holds) == 0 {
				w.started = false
				w.mu.Unlock()
				return
			}
			// Holds came while the watch was being stopped: watch
			// again, from the oldest one's creation.
			from = w.restartFrom()
			w.mu.Unlock()
			continue
		}
		w.mu.Unlock()
		rev, ok := w.resync()
		if !ok {
			return
		}
		from = rev + 1
		w.mu.Lock()
		w.from = from
		w.idleLater() // the holds may all have ended while it was broken
		w.mu.Unlock()
	}
}

// resync reads which entries exist under the prefix, marks every
// registered hold whose entry the read should show and does not as lost,
// and returns the read's revision. A hold registered while the read was
// on its way may have an entry created after the read's revision: it is
// left to the next watch. It retries until the read answers or Close.
func (w *lossWatch) resync() (int64, bool) {
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		ctx, cancel := context.WithTimeout(w.d.ctx, 5*time.Second)
		resp, err := w.d.cli.Get(ctx, w.d.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		cancel()
		if err == nil {
			live := make(map[string]int64, len(resp.Kvs))
			for _, kv := range resp.Kvs {
				live[string(kv.Key)] = kv.CreateRevision
			}
			read := resp.Header.Revision
			w.mu.Lock()
			var gone []*hold
			for k, h := range w.holds {
				// An entry created after the read (a hold granted
				// while it was on its way) is not in it, and tells
				// nothing: the next watch, from the read's revision
				// on, reports its deletion.
				if h.rev <= read && live[k] != h.rev {
					gone = append(gone, h)
					delete(w.holds, k)
				}
			}
			w.mu.Unlock()
			for _, h := range gone {
				w.d.forget(h)
				if h.lease().shared {
					h.lease().untrack(h)
				}
				h.lost.Mark()
			}
			w.advance(read)
			return read, true
		}
		select {
		case <-time.After(backoff):
		case <-w.d.ctx.Done():
			return 0, false
		}
	}
}
