package zookeeper

import (
	"context"
	"errors"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// keyWatch reports every change to a key's queue: a child watch on the
// key's znode, or an existence watch while it has none. Lock does not use
// it (the driver queues on the server, see Acquire); it serves callers of
// the driver.Locker contract that loop over TryAcquire.
type keyWatch struct {
	ch       chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
}

// Watch sets the watch before returning, so no change after it is missed.
func (d *zkDriver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	keyPath := d.prefix + "/" + nodeName(key)
	ev, err := call(ctx, func() (<-chan zk.Event, error) { return d.arm(keyPath) })
	if err != nil {
		return nil, d.fail("watch", err)
	}
	w := &keyWatch{ch: make(chan struct{}, 1), stop: make(chan struct{})}
	go w.loop(d, keyPath, ev)
	return w, nil
}

// arm sets a child watch on keyPath, or an existence watch if it is absent.
func (d *zkDriver) arm(keyPath string) (<-chan zk.Event, error) {
	for {
		_, _, ch, err := d.conn.ChildrenW(keyPath)
		if !errors.Is(err, zk.ErrNoNode) {
			return ch, err
		}
		ok, _, ch, err := d.conn.ExistsW(keyPath)
		if err != nil || !ok {
			return ch, err
		}
		// Created in between: its exists watch fires on the next change;
		// set the child watch instead.
	}
}

func (w *keyWatch) loop(d *zkDriver, keyPath string, ev <-chan zk.Event) {
	defer close(w.ch)
	for {
		select {
		case <-w.stop:
			return
		case <-d.closed:
			return
		case e := <-ev:
			if e.Type == zk.EventNotWatching {
				return // the session ended: the watch is broken
			}
			// Watch again before telling: a change between the event
			// and the new watch is then seen by whoever reads the queue
			// after receiving.
			next, err := d.arm(keyPath)
			if err != nil {
				return
			}
			ev = next
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (w *keyWatch) Changed() <-chan struct{} { return w.ch }

func (w *keyWatch) Close() error {
	w.stopOnce.Do(func() { close(w.stop) })
	return nil
}
