package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// hub is a Driver's pub/sub connection to one instance, shared by all its
// watches. One goroutine reads it and routes release messages to the
// watches of their channel.
type hub struct {
	in      *instance
	index   int // of in in Driver.inst
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

func newHub(in *instance, index int, timeout time.Duration) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hub{
		in:      in,
		index:   index,
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
// pending confirmation fails; go-redis reconnects and subscribes again, and
// the first answer on the new connection wakes every watch once more.
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
		if backoff != 0 {
			// The first answer on a new connection (go-redis has
			// subscribed it again): the instance may have restarted
			// empty, or released keys while the connection was down,
			// and nobody is left to say so. Wake the watches again.
			h.wakeAll()
		}
		backoff = 0
		switch m := msg.(type) {
		case *redis.Message:
			h.mu.Lock()
			for w := range h.subs[m.Channel] {
				w.notify(h.index, m.Payload)
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
	if wake {
		h.wakeAll()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, c := range h.pings {
		c <- fmt.Errorf("pub/sub connection broke: %w", err)
		delete(h.pings, p)
	}
}

// wakeAll wakes every watch of the hub, as a release of its key would.
func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for w := range set {
			w.notify(h.index, "")
		}
	}
}

func (h *hub) close() {
	h.cancel()
	_ = h.ps.Close()
	<-h.done
}
