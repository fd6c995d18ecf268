package dlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"
)

// MultiMutex locks a set of keys all or nothing: one hold for the set, a
// fencing token per key (Tokens), one Done for the set. Make one with
// Locker.NewMultiMutex.
//
// It is built from one Mutex per key, so it works on every backend and
// keeps every promise a Mutex makes, per key. The keys are sorted and
// locked one after the other in that order, so two MultiMutexes over
// overlapping sets never wait on each other in a cycle. A Lock that does
// not take every key gives back the keys it took before it returns. When
// one key's hold is lost, Done closes for the set at once, but no key is
// given back before the windows the holder may still act in have passed.
// docs/multimutex.md has the details and the cost per backend.
//
// A MultiMutex's methods are safe for concurrent use; like a Mutex it is
// not reentrant (Lock while held returns ErrAlreadyHeld).
type MultiMutex struct {
	keys []string
	ms   []*Mutex

	sem chan struct{} // serialises Lock, TryLock and Unlock

	mu      sync.Mutex
	h       *multiHold // current hold; nil when none
	lastErr error      // why the last hold ended, once cleared
}

// multiHold is one hold of the whole set and the goroutine that watches its
// keys' Done channels.
type multiHold struct {
	keys     []keyHold     // each key's hold, in Keys order
	done     chan struct{} // closed when the set's hold ends
	stop     chan struct{} // closed by halt: the watcher exits
	stopOnce sync.Once
	exited   chan struct{} // closed when the watcher has exited

	mu    sync.Mutex
	ended bool
	cause error
}

// NewMultiMutex returns a MultiMutex over keys, made from l with opts (as
// for NewMutex, applied to every key). Duplicate keys count once. An empty
// set, or any key NewMutex refuses, is an ErrInvalidKey error; options are
// checked as by NewMutex (ErrInvalidOption).
func (l *Locker) NewMultiMutex(keys []string, opts ...Option) (*MultiMutex, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: a multi-key lock needs at least one key", ErrInvalidKey)
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	mm := &MultiMutex{keys: sorted, sem: make(chan struct{}, 1)}
	for _, k := range sorted {
		m, err := l.NewMutex(k, opts...)
		if err != nil {
			return nil, fmt.Errorf("dlock: multi-key lock, key %q: %w", k, err)
		}
		mm.ms = append(mm.ms, m)
	}
	return mm, nil
}

// Keys returns the set's keys, sorted, without duplicates: the order in
// which they are locked.
func (mm *MultiMutex) Keys() []string { return slices.Clone(mm.keys) }

func (mm *MultiMutex) errorf(op string, err error) error {
	return fmt.Errorf("dlock: %s of %d keys: %w", op, len(mm.keys), err)
}

func (mm *MultiMutex) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case mm.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (mm *MultiMutex) leave() { <-mm.sem }

func (mm *MultiMutex) current() *multiHold {
	mm.mu.Lock()
	defer mm.mu.Unlock()
	return mm.h
}

// settle checks the current hold before an acquire: a live one is
// ErrAlreadyHeld; one that was lost is cleared: its watcher is stopped and
// the keys it had not yet released are given back, as a Mutex's Lock
// gives back a lost hold. Called with sem held.
func (mm *MultiMutex) settle(ctx context.Context) error {
	h := mm.current()
	if h == nil {
		return nil
	}
	if !mm.checkKeys(h) {
		return ErrAlreadyHeld
	}
	h.halt()
	<-h.exited
	mm.releaseFirst(ctx, len(mm.ms))
	mm.mu.Lock()
	mm.h, mm.lastErr = nil, h.endCause()
	mm.mu.Unlock()
	return nil
}

// Lock blocks until every key is held or ctx ends. It takes the keys in
// Keys order, each as Mutex.Lock does (waiting on the backend's
// notifications); when it returns an error, none of the keys is held by
// this MultiMutex. The error is the failing key's, wrapped: it matches
// ErrNotAcquired and ctx's error when ctx ended while a key was held
// elsewhere, ErrClosed when the Locker was closed, ErrUnavailable when the
// backend failed.
func (mm *MultiMutex) Lock(ctx context.Context) error {
	return mm.acquire(ctx, "lock", (*Mutex).Lock)
}

// TryLock makes one attempt at each key, in Keys order, and stops at the
// first that is held elsewhere: it then releases the keys it took and
// returns an error matching ErrNotAcquired that names the key.
func (mm *MultiMutex) TryLock(ctx context.Context) error {
	return mm.acquire(ctx, "trylock", (*Mutex).TryLock)
}

func (mm *MultiMutex) acquire(ctx context.Context, op string, take func(*Mutex, context.Context) error) error {
	if err := mm.enter(ctx); err != nil {
		return mm.errorf(op, err)
	}
	defer mm.leave()
	if err := mm.settle(ctx); err != nil {
		return mm.errorf(op, err)
	}
	for {
		for i, m := range mm.ms {
			if err := take(m, ctx); err != nil {
				mm.releaseFirst(ctx, i)
				return mm.errorf(op, err)
			}
		}
		// A key taken first may have been lost while a later one was
		// awaited: start again rather than hand out a partial set.
		if mm.allValid() {
			break
		}
		mm.releaseFirst(ctx, len(mm.ms))
		if err := ctx.Err(); err != nil {
			return mm.errorf(op, fmt.Errorf("%w: %w (a key was lost while the others were awaited)", ErrNotAcquired, err))
		}
	}
	h := &multiHold{done: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{})}
	for _, m := range mm.ms {
		h.keys = append(h.keys, keyHoldOf(m))
	}
	mm.mu.Lock()
	mm.h, mm.lastErr = h, nil
	mm.mu.Unlock()
	go mm.watch(h)
	return nil
}

func (mm *MultiMutex) allValid() bool {
	for _, m := range mm.ms {
		if !m.Lease().Valid() {
			return false
		}
	}
	return true
}

// releaseFirst gives back the first n keys, even if ctx has ended. A
// release that fails leaves that key to expire with its lease.
func (mm *MultiMutex) releaseFirst(ctx context.Context, n int) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
	defer cancel()
	for _, m := range mm.ms[:n] {
		_ = m.Unlock(rctx)
	}
}

// watch waits until one key's hold ends or Unlock stops it. A key's end
// ends the set: Done closes, and the keys are released once the holder's
// windows have passed (releaseAfterWindows).
func (mm *MultiMutex) watch(h *multiHold) {
	defer close(h.exited)
	cases := make([]reflect.SelectCase, 0, len(mm.ms)+1)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(h.stop)})
	for _, k := range h.keys {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(k.done)})
	}
	i, _, _ := reflect.Select(cases)
	if i == 0 {
		return
	}
	k := h.keys[i-1]
	mm.lose(h, k)
	if c := k.cause(); c != nil && !errors.Is(c, ErrLockLost) {
		// Ended by Close, not lost: Close gives every key back.
		mm.releaseFirst(context.Background(), len(mm.ms))
		return
	}
	mm.releaseAfterWindows(h)
}

// releaseAfterWindows gives back the keys of a set whose hold was lost,
// each once no window the holder was given can still be open: a key still
// held once the set's window (the earliest Expires of its keys when the
// loss was declared, the latest the set's Lease ever reported) has passed,
// a lost key once its own window has passed too. Releasing a lost key
// earlier would let another client take it while the holder's Lease, read
// before the loss, still says valid. It returns early when Unlock or a
// new Lock stops the watcher (halt): they release every key themselves.
// After Close (which released every key) its releases find the Locker
// closed and change nothing.
func (mm *MultiMutex) releaseAfterWindows(h *multiHold) {
	var end time.Time
	for i, k := range h.keys {
		if e := k.expires(); i == 0 || e.Before(end) {
			end = e
		}
	}
	released := make([]bool, len(h.keys))
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := time.Now()
		var next time.Time
		for i, k := range h.keys {
			if released[i] {
				continue
			}
			at := end
			if isDone(k.done) { // lost (or released): its own window too
				if e := k.expires(); e.After(at) {
					at = e
				}
			}
			if now.Before(at) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), closeReleaseTimeout)
			_ = k.m.Unlock(ctx)
			cancel()
			released[i] = true
		}
		if next.IsZero() {
			return
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(next))
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-timer.C:
		case <-h.stop:
			return
		}
	}
}

// lose ends the set's hold because k's ended.
func (mm *MultiMutex) lose(h *multiHold, k keyHold) {
	cause := k.cause()
	if cause == nil {
		cause = ErrLockLost
	}
	h.end(fmt.Errorf("key %q: %w", k.m.Key(), cause))
}

// keyHold is one key's hold within a set: its Done channel, why it ended
// and the end of its validity window, read from the hold itself (the
// Mutex's Err can lag its Done while the release is in flight, and its
// Lease is zero once the hold has ended).
type keyHold struct {
	m       *Mutex
	done    <-chan struct{}
	cause   func() error
	expires func() time.Time
}

func keyHoldOf(m *Mutex) keyHold {
	if h := m.current(); h != nil {
		return keyHold{m: m, done: h.doneChan(), cause: h.endCause, expires: func() time.Time { return h.leaseNow().Expires }}
	}
	return keyHold{m: m, done: m.Done(), cause: m.Err, expires: endedExpires(m)}
}

// endedExpires bounds the validity window of a key whose hold ended before
// the set recorded it: its Lease while it reports one, else a full TTL
// from the first time it did not (no renewal sent before then can have
// extended the window further).
func endedExpires(m *Mutex) func() time.Time {
	var (
		mu    sync.Mutex
		ttl   = m.Lease().TTL
		after time.Time
	)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if l := m.Lease(); l.Token != 0 {
			ttl = l.TTL
			return l.Expires
		}
		if after.IsZero() {
			after = time.Now().Add(ttl)
		}
		return after
	}
}

// halt stops the watcher: by Unlock, or by a new Lock after a loss.
func (h *multiHold) halt() { h.stopOnce.Do(func() { close(h.stop) }) }

func (h *multiHold) end(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.ended, h.cause = true, cause
	close(h.done)
}

func (h *multiHold) endCause() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cause
}

func (h *multiHold) isEnded() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ended
}

// checkKeys reads each key's Done (which reads the monotonic clock) and
// ends the set's hold at once if one has ended. It reports whether the
// set's hold has ended.
func (mm *MultiMutex) checkKeys(h *multiHold) (ended bool) {
	if h.isEnded() {
		return true
	}
	for _, k := range h.keys {
		k.m.Done() // reads the clock: a window that ran out ends the hold
		if isDone(k.done) {
			mm.lose(h, k)
			return true
		}
	}
	return false
}

// isDone reports whether c is closed, without waiting.
func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Unlock releases every key. It returns ErrNotHeld when the set is not
// held, and an error matching ErrLockLost when a key's hold was lost before
// Unlock; it then gives back at once every key the set had not yet
// released, the lost ones included (guarded: a key taken over since is
// left alone), as Mutex.Unlock does after a loss. As Mutex.Unlock, it
// gives the keys back even when ctx has ended.
func (mm *MultiMutex) Unlock(ctx context.Context) error {
	if mm.current() == nil {
		return mm.errorf("unlock", ErrNotHeld)
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	if err := mm.enter(ctx); err != nil {
		return mm.errorf("unlock", err)
	}
	defer mm.leave()
	mm.mu.Lock()
	h := mm.h
	mm.h = nil
	mm.mu.Unlock()
	if h == nil {
		return mm.errorf("unlock", ErrNotHeld)
	}
	mm.checkKeys(h)
	h.halt()
	<-h.exited
	var errs []error
	if lost := h.endCause(); lost != nil {
		errs = append(errs, lost)
		// Give back what the watcher had not yet released, as
		// Mutex.Unlock does after a loss: the holder has stopped acting.
		for _, m := range mm.ms {
			_ = m.Unlock(ctx)
		}
	} else {
		for _, m := range mm.ms {
			if err := m.Unlock(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		h.end(ErrUnlocked)
		if len(errs) > 0 {
			h.mu.Lock()
			h.cause = errors.Join(errs...)
			h.mu.Unlock()
		}
	}
	mm.mu.Lock()
	mm.lastErr = h.endCause()
	mm.mu.Unlock()
	if len(errs) > 0 {
		return mm.errorf("unlock", errors.Join(errs...))
	}
	return nil
}

// Done returns a channel closed when the set's hold ends: by Unlock, by
// Close of the Locker, or when any key's hold is lost (signalled, as for a
// Mutex, before that key's lease can expire on the server). With no hold it
// returns an already-closed channel. It is a notification; check
// Lease().Valid() before acting.
func (mm *MultiMutex) Done() <-chan struct{} {
	h := mm.current()
	if h == nil {
		return closedChan
	}
	mm.checkKeys(h)
	return h.done
}

// Err reports why the last hold of the set ended: nil while held or if
// nothing was ever held; ErrUnlocked after Unlock; otherwise the first key
// whose hold ended, with its cause (ErrClosed, or an error matching
// ErrLockLost and the kind of loss).
func (mm *MultiMutex) Err() error {
	mm.mu.Lock()
	h, last := mm.h, mm.lastErr
	mm.mu.Unlock()
	if h == nil {
		return last
	}
	mm.checkKeys(h)
	return h.endCause()
}

// Tokens returns each key's fencing token while the whole set is held, nil
// otherwise. Each token is strictly greater than every earlier holder's of
// that key; hand the resource guarded by a key that key's token.
func (mm *MultiMutex) Tokens() map[string]Token {
	h := mm.current()
	if h == nil || mm.checkKeys(h) {
		return nil
	}
	out := make(map[string]Token, len(mm.ms))
	for _, m := range mm.ms {
		t := m.Token()
		if t == 0 {
			return nil
		}
		out[m.Key()] = t
	}
	return out
}

// Token returns the token of the key whose validity window ends first
// (Lease().Token), 0 when the set is not held. A resource guarded by one
// key of the set checks that key's own token: see Tokens.
func (mm *MultiMutex) Token() Token { return mm.Lease().Token }

// Lease returns the lease of the key whose validity window ends first (its
// token, TTL and Expires): the set may be acted on while that one is
// valid. The zero Lease when the set is not held.
func (mm *MultiMutex) Lease() Lease {
	h := mm.current()
	if h == nil || mm.checkKeys(h) {
		return Lease{}
	}
	var first Lease
	for _, m := range mm.ms {
		l := m.Lease()
		if l.Token == 0 {
			return Lease{}
		}
		if first.Token == 0 || l.Expires.Before(first.Expires) {
			first = l
		}
	}
	return first
}

// Renew renews every key's lease now (the watchdog does it on its own).
// It returns an error matching ErrLockLost if a key's hold was lost, and
// ErrNotHeld when the set is not held.
func (mm *MultiMutex) Renew(ctx context.Context) error {
	h := mm.current()
	if h == nil {
		return mm.errorf("renew", ErrNotHeld)
	}
	var errs []error
	for _, m := range mm.ms {
		if err := m.Renew(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return mm.errorf("renew", errors.Join(errs...))
	}
	return nil
}
