package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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
		for _, in := range d.inst {
			d.hub = append(d.hub, newHub(in, d.cfg.Timeout))
		}
	}
	return d.hub, nil
}

// watch is one waiter's subscription on the instances in hubs.
type watch struct {
	d       *Driver
	channel string
	ch      chan struct{}

	mu     sync.Mutex
	hubs   []*hub
	closed bool
}

func (w *watch) Changed() <-chan struct{} { return w.ch }

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

// hub is a Driver's pub/sub connection to one instance, shared by all its
// watches. One goroutine reads it and routes release messages to the
// watches of their channel.
type hub struct {
	in      *instance
	timeout time.Duration
	ps      *redis.PubSub
	cancel  context.CancelFunc
	done    chan struct{} // closed when the reader has exited

	// opMu orders SUBSCRIBE/UNSUBSCRIBE with the changes to subs, so that
	// the server's subscriptions always follow the map.
	opMu sync.Mutex

	mu    sync.Mutex
	subs  map[string]map[*watch]struct{}
	pings map[string]chan error // PING payload -> its waiter
	seq   uint64
}

func newHub(in *instance, timeout time.Duration) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{
		in:      in,
		timeout: timeout,
		ps:      in.client.Subscribe(ctx), // no channel yet: connects on first use
		cancel:  cancel,
		done:    make(chan struct{}),
		subs:    map[string]map[*watch]struct{}{},
		pings:   map[string]chan error{},
	}
	go h.read(ctx)
	return h
}

// subscribe adds w to its channel's subscription and returns once the
// server has confirmed it: a PING sent after the SUBSCRIBE on the same
// connection is answered only after the SUBSCRIBE took effect.
func (h *hub) subscribe(ctx context.Context, w *watch) error {
	h.opMu.Lock()
	h.mu.Lock()
	set := h.subs[w.channel]
	first := set == nil
	if first {
		set = map[*watch]struct{}{}
		h.subs[w.channel] = set
	}
	set[w] = struct{}{}
	h.seq++
	payload := fmt.Sprintf("dlock-%d", h.seq)
	confirmed := make(chan error, 1)
	h.pings[payload] = confirmed
	h.mu.Unlock()
	var err error
	if first {
		err = h.ps.Subscribe(ctx, w.channel)
	}
	if err == nil {
		err = h.ps.Ping(ctx, payload)
	}
	h.opMu.Unlock()
	if err == nil {
		select {
		case err = <-confirmed:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		h.mu.Lock()
		delete(h.pings, payload)
		h.mu.Unlock()
		h.unsubscribe(w)
	}
	return err
}

// unsubscribe removes w; the last watch of a channel unsubscribes it.
func (h *hub) unsubscribe(w *watch) {
	h.opMu.Lock()
	defer h.opMu.Unlock()
	h.mu.Lock()
	set := h.subs[w.channel]
	delete(set, w)
	last := set != nil && len(set) == 0
	if last {
		delete(h.subs, w.channel)
	}
	h.mu.Unlock()
	if last {
		ctx, cancel := context.WithTimeout(context.Background(), h.timeout)
		defer cancel()
		// On failure the connection is replaced, and the new one is
		// subscribed only to the channels still in use.
		_ = h.ps.Unsubscribe(ctx, w.channel)
	}
}

// read routes messages until the hub is closed. When the connection
// breaks, every watch is woken (a release may have been missed) and every
// pending confirmation fails; go-redis reconnects and subscribes again.
func (h *hub) read(ctx context.Context) {
	defer close(h.done)
	backoff := time.Duration(0)
	for {
		msg, err := h.ps.Receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			h.broken(err, backoff == 0) // wake the watches once per outage
			backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		backoff = 0
		switch m := msg.(type) {
		case *redis.Message:
			h.mu.Lock()
			for w := range h.subs[m.Channel] {
				w.wake()
			}
			h.mu.Unlock()
		case *redis.Pong:
			h.mu.Lock()
			if c := h.pings[m.Payload]; c != nil {
				c <- nil
				delete(h.pings, m.Payload)
			}
			h.mu.Unlock()
		}
	}
}

func (h *hub) broken(err error, wake bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if wake {
		for _, set := range h.subs {
			for w := range set {
				w.wake()
			}
		}
	}
	for p, c := range h.pings {
		c <- fmt.Errorf("pub/sub connection broke: %w", err)
		delete(h.pings, p)
	}
}

func (h *hub) close() {
	h.cancel()
	_ = h.ps.Close()
	<-h.done
}
