package dlock

import (
	"context"
	"sync"
)

// gates serialise same-key callers of one Locker. Only the caller that holds
// a key's gate talks to the backend about that key; the others wait here,
// woken by a channel, never by polling, in the order they came. This is how
// waiters for one key in one process share one backend wait (one
// subscription, one queue entry), and why two Mutexes of one Locker exclude
// each other without a round trip.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
	// spare is a gate no key uses any more, kept for the next key taken:
	// a key locked and unlocked over and over costs no allocation.
	spare *gate
}

// gate is one key's. A key held with nobody else waiting, which is every
// key of a process holding many locks, costs no channel: the gate is just
// marked taken. The channel is made when a second caller comes; the token
// in its buffer then stands for the taker, and every caller after that
// queues on it.
type gate struct {
	ch    chan struct{} // holds one token while the gate is taken; nil until contended
	taken bool          // while ch is nil
	refs  int
}

// take refs key's gate and takes it if that needs no wait. Otherwise it
// returns the gate's channel, to send the caller's token on.
func (g *gates) take(key string) (gt *gate, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gt = g.m[key]
	if gt == nil {
		if gt = g.spare; gt != nil {
			g.spare = nil
		} else {
			gt = &gate{}
		}
		g.m[key] = gt
	}
	gt.refs++
	if gt.ch == nil {
		if !gt.taken {
			gt.taken = true
			return gt, true
		}
		gt.ch = make(chan struct{}, 1)
		gt.ch <- struct{}{} // the current taker's
	}
	return gt, false
}

// drop unrefs key's gate, g.mu held; the last ref removes it, and keeps it
// as the spare if it is as new (never contended). No caller uses a gate
// after its last ref is dropped.
func (g *gates) drop(key string, gt *gate) {
	gt.refs--
	if gt.refs > 0 {
		return
	}
	delete(g.m, key)
	if gt.ch == nil && g.spare == nil {
		gt.taken = false
		g.spare = gt
	}
}

func (g *gates) unref(key string, gt *gate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.drop(key, gt)
}

// enter takes key's gate, waiting until it is free, ctx ends or closed is
// closed. On success the caller must call leave exactly once.
func (g *gates) enter(ctx context.Context, key string, closed <-chan struct{}) (*gate, error) {
	gt, ok := g.take(key)
	if ok {
		return gt, nil
	}
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
	gt, ok := g.take(key)
	if ok {
		return gt, true
	}
	select {
	case gt.ch <- struct{}{}:
		return gt, true
	default:
		g.unref(key, gt)
		return nil, false
	}
}

func (g *gates) leave(key string, gt *gate) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gt.ch != nil {
		<-gt.ch // never blocks: the token is the leaver's
	} else {
		gt.taken = false
	}
	g.drop(key, gt)
}
