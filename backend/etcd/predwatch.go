package etcd

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// predIdle is how long a predecessor watch outlives the wait that used it.
// Under contention a Locker's waiter mostly waits behind the same other
// Locker's entry, whose name (its lease) repeats: keeping the watch saves
// setting one up, and etcd the work of creating and cancelling it, per
// handoff.
const predIdle = time.Second

// predWatch watches one entry name for deletions. Its channel holds every
// change after revision covered() that nobody has received yet, also while
// the watch is idle, so a later wait can use it as if it had just been
// created there; deletions of an earlier incarnation of the name are told
// apart by their revision (deletedAfter).
type predWatch struct {
	key    string
	ch     clientv3.WatchChan
	cancel context.CancelFunc
	from   int64 // the watch started after this revision
	seen   int64 // header revision of the last response received
	idle   *time.Timer
}

// covered is the revision after which every change is still to be
// received: responses of one watch come in revision order.
func (w *predWatch) covered() int64 { return max(w.from, w.seen) }

// received records a response taken from the channel.
func (w *predWatch) received(wr clientv3.WatchResponse) { w.seen = max(w.seen, wr.Header.Revision) }

// predWatches holds the idle predecessor watches of a Locker, by name.
type predWatches struct {
	mu   sync.Mutex
	idle map[string]*predWatch
}

// predWatch returns a watch on key: an idle one, or a new one once etcd has
// confirmed it.
func (d *drv) predWatch(ctx context.Context, key string) (*predWatch, error) {
	p := &d.preds
	p.mu.Lock()
	if w := p.idle[key]; w != nil {
		delete(p.idle, key)
		if w.idle.Stop() {
			p.mu.Unlock()
			return w, nil
		}
		// Its timer has fired and is cancelling it.
	}
	p.mu.Unlock()
	// Each attempt is bounded: a watch sent to a member that stopped
	// answering (a paused leader) is never created, and meanwhile the
	// waiter does not keep its lease alive.
	var w *predWatch
	err := retry(ctx, func(ctx context.Context) error {
		wctx, cancel := context.WithCancel(d.leaderCtx)
		nw := &predWatch{key: key, ch: d.cli.Watch(wctx, key, clientv3.WithFilterPut(), clientv3.WithCreatedNotify()), cancel: cancel}
		from, err := d.created(ctx, keyWatch{ch: nw.ch, cancel: cancel})
		if err != nil {
			cancel()
			return err
		}
		nw.from, w = from, nw
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// releasePredWatch hands back a watch after a wait: kept for predIdle if it still
// works, cancelled if broken.
func (d *drv) releasePredWatch(w *predWatch, broken bool) {
	if broken {
		w.cancel()
		return
	}
	p := &d.preds
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		p.idle = map[string]*predWatch{}
	}
	if _, dup := p.idle[w.key]; dup || d.isDone() {
		w.cancel()
		return
	}
	p.idle[w.key] = w
	w.idle = time.AfterFunc(predIdle, func() {
		p.mu.Lock()
		if p.idle[w.key] == w {
			delete(p.idle, w.key)
		}
		p.mu.Unlock()
		w.cancel()
	})
}

// closeIdle cancels every idle watch.
func (p *predWatches) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, w := range p.idle {
		w.idle.Stop()
		w.cancel()
		delete(p.idle, k)
	}
}
