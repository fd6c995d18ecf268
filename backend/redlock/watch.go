package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dlock-go/dlock/driver"
)

// Watch subscribes to key's release channel on every instance, in
// parallel, and returns once the subscription is confirmed on a majority.
// A release publishes on every instance the holder had, a majority, so at
// least one confirmed subscription hears it; a message from any instance
// wakes the waiter. Expiry publishes nothing: the portable layer also waits
// for the remaining lease reported by TryAcquire.
//
// All watches of one Driver share one pub/sub connection per instance.
func (d *Driver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	w := &watch{d: d, channel: d.names(key).channel, ch: make(chan struct{}, 1)}
	type result struct {
		h   *hub
		err error
	}
	hubs, err := d.hubs()
	if err != nil {
		return nil, err
	}
	results := make(chan result, len(d.inst))
	for i, in := range d.inst {
		h := hubs[i]
		in.requests.Add(1)
		go func() {
			sctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
			defer cancel()
			results <- result{h, h.subscribe(sctx, w)}
		}()
	}
	// Return once a majority confirmed; the others join the watch in the
	// background (a paused instance costs nothing here).
	var firstErr error
	ok, pending := 0, len(d.inst)
	for pending > 0 && ok < d.quorum {
		r := <-results
		pending--
		if err := d.subscribed(ctx, w, r.h, r.err); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		ok++
	}
	if pending > 0 {
		go func() {
			for range pending {
				r := <-results
				_ = d.subscribed(ctx, w, r.h, r.err)
			}
		}()
	}
	if ok < d.quorum {
		_ = w.Close()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, driver.Unavailable(fmt.Errorf("redlock: subscribed on %d of %d instances, %d needed: %w",
			ok, len(d.inst), d.quorum, firstErr))
	}
	return w, nil
}

// subscribed records the outcome of w's subscription on h.
func (d *Driver) subscribed(ctx context.Context, w *watch, h *hub, err error) error {
	if err != nil {
		h.in.errors.Add(1)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			h.in.timeouts.Add(1)
		}
		return fmt.Errorf("instance %s: %w", h.in.addr, err)
	}
	w.mu.Lock()
	closed := w.closed
	if !closed {
		w.hubs = append(w.hubs, h)
	}
	w.mu.Unlock()
	if closed { // the watch ended before this instance confirmed
		h.unsubscribe(w)
	}
	return nil
}

// hubs returns the pub/sub hub of every instance, starting them on first
// use.
func (d *Driver) hubs() ([]*hub, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed {
		return nil, driver.ErrClosed
	}
	if d.hub == nil {
		for i, in := range d.inst {
			d.hub = append(d.hub, newHub(in, i, d.cfg.Timeout))
		}
	}
	return d.hub, nil
}

// watch is one waiter's subscription on the instances in hubs.
type watch struct {
	d       *Driver
	channel string
	ch      chan struct{}
	// route, when set, receives the channel's messages instead of wake:
	// for the Driver's inbox subscription (see WatchLock).
	route func(inst int, payload string)

	mu     sync.Mutex
	hubs   []*hub
	closed bool
}

func (w *watch) Changed() <-chan struct{} { return w.ch }

// notify delivers a message of w's channel from instance inst.
func (w *watch) notify(inst int, payload string) {
	if w.route != nil {
		// Lock order: hub.mu, then Driver.mu; nothing takes them the other
		// way round.
		w.route(inst, payload)
		return
	}
	w.wake()
}

func (w *watch) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Close unsubscribes, in parallel, from the instances it subscribed on.
func (w *watch) Close() error {
	w.mu.Lock()
	hubs := w.hubs
	w.hubs, w.closed = nil, true
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.unsubscribe(w)
		}()
	}
	wg.Wait()
	return nil
}
