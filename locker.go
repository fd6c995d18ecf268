package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// closeReleaseTimeout bounds how long Close spends releasing held locks.
const closeReleaseTimeout = 5 * time.Second

// locker is the portable Locker over one driver.
type locker struct {
	drv      driver.Locker
	acq      driver.Acquirer // nil unless the driver queues on the server
	lim      driver.Limits
	defaults options

	closed chan struct{} // closed by Close
	gates  gates
	wg     sync.WaitGroup // watchdog goroutines

	mu       sync.Mutex
	isClosed bool
	holds    map[*hold]struct{}
}

// NewLocker wraps a driver in the portable Locker. Backend packages call it
// from their constructors; programs normally use Open or a backend's New.
// The options set the defaults of every Mutex made from the Locker.
func NewLocker(d driver.Locker, opts ...Option) (Locker, error) {
	if d == nil {
		return nil, errors.New("dlock: NewLocker with a nil driver")
	}
	l := &locker{
		drv:      d,
		defaults: defaultOptions(),
		closed:   make(chan struct{}),
		gates:    gates{m: map[string]*gate{}},
		holds:    map[*hold]struct{}{},
	}
	for _, o := range opts {
		o(&l.defaults)
	}
	if a, ok := d.(driver.Acquirer); ok {
		l.acq = a
	}
	if lm, ok := d.(driver.Limiter); ok {
		l.lim = lm.Limits()
	}
	l.defaults = l.defaults.withinLimits(l.lim)
	if err := l.defaults.validate(l.lim); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *locker) NewMutex(key string, opts ...Option) (Mutex, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > driver.MaxKeyLen {
		return nil, fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), driver.MaxKeyLen)
	}
	o := l.defaults
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(l.lim); err != nil {
		return nil, err
	}
	return &mutex{l: l, key: key, opts: o}, nil
}

func (l *locker) checkOpen() error {
	select {
	case <-l.closed:
		return ErrClosed
	default:
		return nil
	}
}

// track registers a new hold; it fails if the Locker was closed meanwhile.
func (l *locker) track(h *hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isClosed {
		return ErrClosed
	}
	l.holds[h] = struct{}{}
	return nil
}

func (l *locker) untrack(h *hold) {
	l.mu.Lock()
	delete(l.holds, h)
	l.mu.Unlock()
}

func (l *locker) Close() error {
	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		return nil
	}
	l.isClosed = true
	close(l.closed)
	holds := make([]*hold, 0, len(l.holds))
	for h := range l.holds {
		holds = append(holds, h)
	}
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeReleaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.m.release(ctx, h)
		}()
	}
	wg.Wait()
	l.wg.Wait()
	return l.drv.Close()
}
