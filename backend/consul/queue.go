package consul

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// The line of waiters. Consul has no queue for a KV lock: when a key is
// freed, every process that follows it with a blocking query wakes and
// tries, one wins and the rest fail and follow again, so each acquisition
// costs every waiter a wake-up, a query and a refused transaction, and the
// quickest process (often the releaser) wins again and again.
//
// So a Lock that waits (driver.LockWatcher) stands in a line kept in the
// KV store, as in Consul's semaphore recipe and etcd's queue: a ticket, an
// entry under queuePrefix(path) locked by the waiter's session (so that a
// dead waiter's ticket goes with its session, behavior=delete), its place
// its CreateIndex. A waiter follows only the ticket just ahead of its own
// (a blocking query on that one entry); the first in line alone follows
// the key, and only it is woken by a release. Its acquire deletes its
// ticket in the same transaction (delete-cas: a ticket gone means the
// attempt is refused and the waiter falls in line again), which wakes the
// next in line, who then follows the key. A release reads the line in the
// transaction that deletes the key; when someone stands in it, this
// Locker's next Lock goes to the back of the line instead of taking the
// key straight back. The Lockers of one process share one ticket per key,
// so a process gets one turn per round of the line.

// line is this Locker's waiting on one key: the Lock watches of the key
// and, once an attempt was refused, its ticket. Guarded by d.linesMu.
type line struct {
	d       *consulDriver
	path    string
	watches map[*lockWatch]struct{}
	t       *ticket // this Locker's place in the line; nil when none
	busy    bool    // an attempt (with t or for t) is in flight
}

// ticket is one entry in a key's line.
type ticket struct {
	key   string
	s     *session // locks the entry; one use of it (shared.put on leave)
	index uint64   // the entry's ModifyIndex (= CreateIndex)
	stop  context.CancelFunc
	ended atomic.Bool // the follower wakes no one any more
}

// end stops t's follower: at once for what it wakes, after
// watchCloseGrace for its blocking query, which the acquire that used t
// or the next change ends on its own (a query cancelled in flight costs
// its connection).
func (t *ticket) end() {
	if !t.ended.Swap(true) && t.stop != nil {
		time.AfterFunc(watchCloseGrace, t.stop)
	}
}

// lockWatch is one waiting Lock's watch of a key (driver.LockWatcher).
type lockWatch struct {
	l      *line
	ch     chan struct{}
	closed atomic.Bool
}

func (w *lockWatch) Changed() <-chan struct{} { return w.ch }

func (w *lockWatch) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

var _ driver.LockWatcher = (*consulDriver)(nil)

// WatchLock (driver.LockWatcher) is Watch for a waiting Lock: the Lock's
// refused attempts put this Locker in the key's line, and it is woken only
// when it stands first and the key is free (see the top of this file). It
// costs no round trip. With Config.SessionPerHold there is no line (a
// ticket needs a session that lives while the waiter waits) and it is
// Watch.
func (d *consulDriver) WatchLock(ctx context.Context, key string) (driver.Watch, error) {
	if d.shared == nil {
		return d.Watch(ctx, key)
	}
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	path := d.path(key)
	w := &lockWatch{ch: make(chan struct{}, 1)}
	d.linesMu.Lock()
	defer d.linesMu.Unlock()
	l := d.lines[path]
	if l == nil {
		l = &line{d: d, path: path, watches: map[*lockWatch]struct{}{}}
		d.lines[path] = l
	}
	l.watches[w] = struct{}{}
	w.l = l
	return w, nil
}

// Close leaves the line when it was the key's last Lock watch: the ticket
// is deleted (in the background), so that a Lock that gives up leaves no
// entry behind.
func (w *lockWatch) Close() error {
	if w.closed.Swap(true) {
		return nil
	}
	l := w.l
	d := l.d
	d.linesMu.Lock()
	delete(l.watches, w)
	var t *ticket
	if len(l.watches) == 0 {
		if d.lines[l.path] == l {
			delete(d.lines, l.path)
		}
		if !l.busy {
			t, l.t = l.t, nil
		}
	}
	d.linesMu.Unlock()
	if t != nil {
		d.leave(t)
	}
	return nil
}

// wake signals every Lock watch of l. d.linesMu is held.
func (l *line) wake() {
	for w := range l.watches {
		w.signal()
	}
}

// queuePrefix is the KV prefix of path's line. No user key's path has a
// segment that starts with '.' (see encodeKey), so the lines are apart
// from the keys, and from each other: the line of "a/b" is not under the
// line of "a".
func (d *consulDriver) queuePrefix(path string) string {
	return d.prefix + "/.q/" + strings.TrimPrefix(path, d.prefix+"/") + "/.w/"
}

// lineOf returns the line of path when a Lock of this Locker waits on it.
func (d *consulDriver) lineOf(path string) *line {
	d.linesMu.Lock()
	defer d.linesMu.Unlock()
	return d.lines[path]
}

// errTicketGone refuses an attempt whose ticket is no longer in line.
var errTicketGone = errors.New("consul: place in line lost")

// tryQueued is TryAcquire for a key a Lock of this Locker waits on. Without
// a ticket it attempts (unless a release just saw a line: then it goes to
// the back of it), and falls in line when refused; with one, it attempts
// only as the holder of that ticket, which the acquire deletes.
func (d *consulDriver) tryQueued(ctx context.Context, l *line, req driver.Request) (driver.Hold, error) {
	d.linesMu.Lock()
	if l.busy {
		// Another Lock of this Locker is attempting for the line: this
		// one is woken when that attempt is over.
		d.linesMu.Unlock()
		return driver.Hold{}, &driver.HeldError{}
	}
	l.busy = true
	t := l.t
	d.linesMu.Unlock()
	h, t, err := d.attemptQueued(ctx, l, t, req)
	d.linesMu.Lock()
	l.busy = false
	if len(l.watches) == 0 && t != nil {
		// Every watch closed while the attempt was in flight.
		l.t = nil
		d.linesMu.Unlock()
		d.leave(t)
		return h, err
	}
	l.t = t
	if t == nil && len(l.watches) > 1 {
		l.wake() // the others attempt, or fall in line, themselves
	}
	d.linesMu.Unlock()
	return h, err
}

// attemptQueued makes tryQueued's attempt. It returns the line's ticket
// afterwards (nil when it was used or lost).
func (d *consulDriver) attemptQueued(ctx context.Context, l *line, t *ticket, req driver.Request) (driver.Hold, *ticket, error) {
	if t == nil {
		if !d.fair.lineSeen(l.path) {
			h, err := d.tryAcquire(ctx, l.path, req, nil)
			var held *driver.HeldError
			if !errors.As(err, &held) || held.Remaining > 0 {
				return h, nil, err // taken, failed, or a lock-delay: retried on a timer
			}
		}
		var head, free bool
		var err error
		t, head, free, err = d.enqueue(ctx, l, req.TTL)
		if err != nil {
			return driver.Hold{}, nil, err
		}
		if !head || !free {
			return driver.Hold{}, t, &driver.HeldError{}
		}
	}
	h, err := d.tryAcquire(ctx, l.path, req, t)
	switch {
	case err == nil:
		d.used(t)
		if hs, _ := h.State.(*hold); hs != nil {
			hs.viaLine = true
		}
		return h, nil, nil
	case errors.Is(err, errTicketGone), errors.Is(err, errInvalidSession):
		d.leave(t)
		return driver.Hold{}, nil, &driver.HeldError{Remaining: lockDelayFirstRetry}
	}
	return h, t, err
}

// enqueue puts this Locker at the back of l's line: one transaction writes
// the ticket and reads the line and the key. It starts the ticket's
// follower and reports whether the ticket stands first and the key is free.
func (d *consulDriver) enqueue(ctx context.Context, l *line, ttl time.Duration) (t *ticket, head, free bool, err error) {
	s, err := d.shared.get(ctx, ttl)
	if err != nil {
		return nil, false, false, err
	}
	qp := d.queuePrefix(l.path)
	key := fmt.Sprintf("%s%s-%016x", qp, s.id, rand.Uint64())
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: key, Session: s.id}},
		{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: qp}},
		{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: l.path}},
	}
	// A caller that gives up while the ticket is on its way still gets
	// the answer (see txnContext), so that the ticket is known and left.
	tctx, stop := txnContext(ctx)
	ok, resp, _, err := d.c.Txn().Txn(ops, d.qopts(tctx))
	stop()
	if err != nil {
		// Ambiguous: the ticket may have been written, or may yet be: a
		// request given up is still applied by the agent, possibly after
		// a delete sent at once. A ticket left there would stop the line
		// behind it for as long as the session lives, so it is deleted
		// now and again later. Its name is this attempt's alone.
		d.background(func(ctx context.Context) {
			for _, wait := range []time.Duration{0, 100 * time.Millisecond, time.Second} {
				if !sleepCtx(ctx, wait) {
					break
				}
				_, _ = d.c.KV().Delete(key, d.wopts(ctx))
			}
			d.shared.put(s)
		})
		return nil, false, false, mapErr(ctx, "enqueue", err)
	}
	if !ok {
		d.shared.put(s)
		if invalidSession(resp) {
			d.shared.gone(s)
		}
		return nil, false, false, &driver.HeldError{Remaining: lockDelayFirstRetry}
	}
	t = &ticket{key: key, s: s}
	var waiters []*api.KVPair
	free = true
	for _, r := range resp.Results {
		switch kv := r.KV; {
		case kv == nil:
		case kv.Key == l.path:
			free = isFree(kv)
		case strings.HasPrefix(kv.Key, qp):
			if kv.Key == key {
				t.index = kv.ModifyIndex
			}
			waiters = append(waiters, kv)
		}
	}
	if t.index == 0 {
		d.leave(t)
		return nil, false, false, driver.Unavailable(fmt.Errorf("consul: enqueue %q: unexpected transaction result", l.path))
	}
	head = ahead(waiters, t) == nil
	fctx, stop := context.WithCancel(d.ctx)
	t.stop = stop
	if !d.goTracked(func() {
		defer stop()
		d.follow(fctx, l, t, head)
	}) {
		d.leave(t)
		return nil, false, false, driver.ErrClosed
	}
	return t, head, free, nil
}

// ahead returns the ticket just ahead of t among the line's entries (nil
// when t stands first, or is not among them).
func ahead(waiters []*api.KVPair, t *ticket) *api.KVPair {
	var prev *api.KVPair
	for _, kv := range waiters {
		if kv.CreateIndex < t.index && (prev == nil || kv.CreateIndex > prev.CreateIndex) {
			prev = kv
		}
	}
	return prev
}

// used ends t after an acquire that deleted it.
func (d *consulDriver) used(t *ticket) {
	t.end()
	d.shared.put(t.s)
}

// leave takes t out of the line: its follower stops and the entry is
// deleted in the background (if it is still t's: delete-cas).
func (d *consulDriver) leave(t *ticket) {
	t.end()
	d.background(func(ctx context.Context) {
		if t.index != 0 {
			_, _, _ = d.c.KV().DeleteCAS(&api.KVPair{Key: t.key, ModifyIndex: t.index}, d.wopts(ctx))
		}
		d.shared.put(t.s)
	})
}

// follow waits for t's turn: it follows the ticket ahead until it is
// gone, then the key, waking l's watches when the key is free. It keeps
// t's session alive meanwhile (the Locker may hold nothing that renews
// it). When t is no longer in line it wakes them too: their next attempt
// finds the ticket gone and falls in line again.
func (d *consulDriver) follow(ctx context.Context, l *line, t *ticket, head bool) {
	stopRenew := d.keepAlive(ctx, l, t)
	defer stopRenew()
	qp := d.queuePrefix(l.path)
	for !head {
		pairs, meta, err := d.bc.KV().List(qp, d.qopts(ctx))
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if !sleepCtx(ctx, monitorRetry) {
				return
			}
			continue
		}
		if t.ended.Load() {
			return
		}
		if !slices.ContainsFunc(pairs, func(kv *api.KVPair) bool { return kv.Key == t.key }) {
			d.wakeLine(l, t)
			return
		}
		prev := ahead(pairs, t)
		if prev == nil {
			break
		}
		if !d.awaitGone(ctx, t, prev.Key, meta.LastIndex) {
			return
		}
	}
	d.followKey(ctx, l, t)
}

// awaitGone returns once the entry key no longer exists (true), or ctx
// ends (false).
func (d *consulDriver) awaitGone(ctx context.Context, t *ticket, key string, index uint64) bool {
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: monitorWait}).WithContext(ctx)
		kv, meta, err := d.watchRead(key, q)
		if ctx.Err() != nil || t.ended.Load() {
			return false
		}
		if err != nil {
			if !sleepCtx(ctx, monitorRetry) {
				return false
			}
			continue
		}
		if kv == nil {
			return true
		}
		if meta.LastIndex < index {
			index = 0
		} else {
			index = meta.LastIndex
		}
	}
}

// followKey follows l's key for the first in line, waking l's watches
// when it is free (see watchLoop).
func (d *consulDriver) followKey(ctx context.Context, l *line, t *ticket) {
	var index uint64
	free := false
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: monitorWait}).WithContext(ctx)
		kv, meta, err := d.watchRead(l.path, q)
		if ctx.Err() != nil || t.ended.Load() {
			return
		}
		if err != nil {
			if !sleepCtx(ctx, monitorRetry) {
				return
			}
			continue
		}
		// The key seen held is not noted for guardIndex: the attempt
		// that follows is made once it is seen free.
		nowFree := isFree(kv)
		if nowFree && (!free || meta.LastIndex != index) {
			d.wakeLine(l, t)
		}
		free = nowFree
		if meta.LastIndex < index {
			index = 0
		} else {
			index = meta.LastIndex
		}
	}
}

// wakeLine wakes l's watches for t, unless t has ended.
func (d *consulDriver) wakeLine(l *line, t *ticket) {
	if t.ended.Load() {
		return
	}
	d.linesMu.Lock()
	l.wake()
	d.linesMu.Unlock()
}

// keepAlive renews t's session every third of its TTL while t waits; a
// session found gone wakes the line (the ticket went with it).
func (d *consulDriver) keepAlive(ctx context.Context, l *line, t *ticket) func() {
	_, ttl := t.s.state()
	tk := time.NewTicker(max(ttl/3, time.Second))
	done := make(chan struct{})
	if !d.goTracked(func() {
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-tk.C:
			}
			_, ok, err := d.renewSession(ctx, t.s)
			if err == nil && !ok {
				d.shared.gone(t.s)
				d.wakeLine(l, t)
				return
			}
		}
	}) {
		tk.Stop()
	}
	return func() { close(done) }
}

// sleepCtx waits for d or ctx; it reports false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
