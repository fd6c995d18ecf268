package dlock

import (
	"context"
	"sync"
)

// gates serialise same-key callers of one Locker. Only the caller that holds
// a key's gate talks to the backend about that key; the others wait here,
// woken by a channel, never by polling. This is how waiters for one key in
// one process share one backend wait (one subscription, one queue entry),
// and why two Mutexes of one Locker exclude each other without a round trip.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	ch   chan struct{} // holds one token while the gate is taken
	refs int
}

func (g *gates) ref(key string) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt := g.m[key]
	if gt == nil {
		gt = &gate{ch: make(chan struct{}, 1)}
		g.m[key] = gt
	}
	gt.refs++
	return gt
}

func (g *gates) unref(key string, gt *gate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt.refs--
	if gt.refs == 0 {
		delete(g.m, key)
	}
}

// enter takes key's gate, waiting until it is free, ctx ends or closed is
// closed. On success the caller must call leave exactly once.
func (g *gates) enter(ctx context.Context, key string, closed <-chan struct{}) (*gate, error) {
	gt := g.ref(key)
	select {
	case gt.ch <- struct{}{}:
		return gt, nil
	case <-ctx.Done():
		g.unref(key, gt)
		return nil, ctx.Err()
	case <-closed:
		g.unref(key, gt)
		return nil, ErrClosed
	}
}

// tryEnter takes key's gate only if it is free.
func (g *gates) tryEnter(key string) (*gate, bool) {
	gt := g.ref(key)
	select {
	case gt.ch <- struct{}{}:
		return gt, true
	default:
		g.unref(key, gt)
		return nil, false
	}
}

func (g *gates) leave(key string, gt *gate) {
	<-gt.ch
	g.unref(key, gt)
}
