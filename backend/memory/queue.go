package memory

import (
	"container/list"
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// line is one key's waiting Locks, first in line first. A key with a
// line is always held: a release, an expiry or a Break hands the key to
// the first waiter at once (handOff), so a Lock never wakes to find the
// key taken, and a newcomer (Lock or TryLock) never takes it ahead of a
// Lock that was waiting.
type line struct {
	l list.List // of *waiter
}

// waiter is one Lock in a line.
type waiter struct {
	req   driver.Request
	ready chan struct{} // closed when hold is set
	hold  driver.Hold
	at    *list.Element // nil once granted or gone
}

// waiters is the length of key's line. s.mu held.
func (s *Store) waiters(key string) int {
	if ln := s.lines[key]; ln != nil {
		return ln.l.Len()
	}
	return 0
}

// handOff grants key, now free, to the first waiter in its line.
// s.mu held.
func (s *Store) handOff(key string, now time.Time) {
	ln := s.lines[key]
	if ln == nil {
		return
	}
	w := ln.l.Remove(ln.l.Front()).(*waiter)
	w.at = nil
	if ln.l.Len() == 0 {
		delete(s.lines, key)
	}
	w.hold = s.grant(w.req, now)
	close(w.ready)
}

// Acquire (driver.Acquirer) takes req.Key at once when it is free and
// nobody waits for it; otherwise it joins the key's line and blocks until
// the key is handed to it, first come first served, or ctx ends (or the
// Locker is closed), when it leaves the line. A hand-off that comes as ctx
// ends wins: the hold is returned.
func (d *memDriver) Acquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	s := d.s
	s.mu.Lock()
	now := time.Now()
	if s.current(req.Key, now) == nil && s.lines[req.Key] == nil {
		h := s.grant(req, now)
		s.mu.Unlock()
		return h, nil
	}
	ln := s.lines[req.Key]
	if ln == nil {
		ln = &line{}
		s.lines[req.Key] = ln
	}
	w := &waiter{req: req, ready: make(chan struct{})}
	w.at = ln.l.PushBack(w)
	s.mu.Unlock()

	var err error
	select {
	case <-w.ready:
		return w.hold, nil
	case <-ctx.Done():
		err = fmt.Errorf("%w: %w", driver.ErrNotAcquired, ctx.Err())
	case <-d.closed:
		err = driver.ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.at == nil { // handed over meanwhile
		return w.hold, nil
	}
	ln.l.Remove(w.at)
	w.at = nil
	if ln.l.Len() == 0 && s.lines[req.Key] == ln {
		delete(s.lines, req.Key)
	}
	return driver.Hold{}, err
}
