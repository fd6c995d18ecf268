package consul

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// watchCloseGrace is how long a closed watch's blocking query may still
// run. A waiter that acquires the key changes it, which ends the query on
// its own; letting it return keeps its connection for reuse instead of
// tearing it down.
const watchCloseGrace = 50 * time.Millisecond

type watch struct {
	ch     chan struct{}
	cancel context.CancelFunc
	closed atomic.Bool
}

func (w *watch) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

func (w *watch) Changed() <-chan struct{} { return w.ch }

func (w *watch) Close() error {
	if !w.closed.Swap(true) {
		time.AfterFunc(watchCloseGrace, w.cancel)
	}
	return nil
}

// Watch reads the key once, to learn its index (so that no change after
// Watch returns can be missed), then follows it with blocking queries. It
// signals when the key becomes free: deleted (released, or its session
// ended) or unlocked, including a hold that came and went between two
// answers. A change from one holder to the next is not a signal: waking
// for it would only cost a failed attempt.
func (d *consulDriver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	path := d.path(key)
	kv, meta, err := d.watchRead(path, d.qopts(ctx))
	if err != nil {
		return nil, mapErr(ctx, "watch", err)
	}
	wctx, cancel := context.WithCancel(d.ctx)
	w := &watch{ch: make(chan struct{}, 1), cancel: cancel}
	free := isFree(kv)
	if free {
		w.signal()
	}
	if !d.goTracked(func() {
		defer cancel()
		defer close(w.ch)
		d.watchLoop(wctx, w, path, meta.LastIndex, free)
	}) {
		cancel()
		return nil, driver.ErrClosed
	}
	return w, nil
}

func isFree(kv *api.KVPair) bool { return kv == nil || kv.Session == "" }

// watchRead reads the key at path by listing path as a prefix. A blocking
// read of the key itself cannot follow a missing key: Consul answers "not
// found, and still not found" as no change, so a hold taken and released
// between two runs of the query (an Election's announcement, a quick
// Lock+Unlock) never ends it. A listing's index is that of the newest
// entry or tombstone under the prefix, so the released key's tombstone
// moves it. Keys that merely begin with path are skipped (they can only
// cause a spurious signal).
func (d *consulDriver) watchRead(path string, q *api.QueryOptions) (*api.KVPair, *api.QueryMeta, error) {
	pairs, meta, err := d.bc.KV().List(path, q)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pairs {
		if p.Key == path {
			return p, meta, nil
		}
	}
	return nil, meta, nil
}

// watchLoop returns when the watch is closed or breaks; the caller then
// closes the channel, which tells the portable layer to watch again.
func (d *consulDriver) watchLoop(ctx context.Context, w *watch, path string, index uint64, free bool) {
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: monitorWait}).WithContext(ctx)
		kv, meta, err := d.watchRead(path, q)
		if err != nil || w.closed.Load() || ctx.Err() != nil {
			return
		}
		nowFree := isFree(kv)
		d.fair.observed(path, !nowFree)
		// A free key whose index moved is a signal too, even if the last
		// answer also showed it free: a hold can be taken and released
		// (the key deleted) between two answers, as an Election's
		// announcement is, and that release must wake the watcher.
		if nowFree && (!free || meta.LastIndex != index) {
			w.signal()
		}
		free = nowFree
		if meta.LastIndex < index {
			index = 0 // the index went backwards (snapshot restore): start over
		} else {
			index = meta.LastIndex
		}
	}
}
