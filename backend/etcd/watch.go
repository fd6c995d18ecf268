package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// Watch watches key's whole queue for deletions (a release, an expiry, a
// waiter leaving). dlock's Lock does not use it, since this driver queues
// on the server (Acquire); it serves callers that retry TryLock.
func (d *drv) Watch(ctx context.Context, key string) (_ driver.Watch, err error) {
	ctx, leave, err := d.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave(&err)
	wctx, cancel := context.WithCancel(d.leaderCtx)
	kw := keyWatch{
		ch:     d.cli.Watch(wctx, d.queue(key), clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()),
		cancel: cancel,
	}
	if _, err := d.created(ctx, kw); err != nil {
		kw.stop()
		return nil, err
	}
	w := &queueWatch{kw: kw, changed: make(chan struct{}, 1), done: make(chan struct{})}
	go w.forward()
	return w, nil
}

// queueWatch is a driver.Watch over one queue prefix.
type queueWatch struct {
	kw      keyWatch
	changed chan struct{}
	done    chan struct{}
}

// forward turns deletions into Changed signals; it closes Changed when the
// etcd watch ends (broken, or closed by Close or the driver's Close).
func (w *queueWatch) forward() {
	defer close(w.done)
	defer close(w.changed)
	defer w.kw.cancel()
	for wr := range w.kw.ch {
		if wr.Err() != nil {
			return
		}
		if deletedAfter(wr, 0) {
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
	}
}

func (w *queueWatch) Changed() <-chan struct{} { return w.changed }

func (w *queueWatch) Close() error {
	w.kw.cancel()
	<-w.done
	return nil
}
