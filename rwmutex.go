package dlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// RWMutex is one holder's handle on a distributed read-write lock: many
// readers at a time (at most a fixed number), or one writer, across
// processes, on any backend. Make one with Locker.NewRWMutex.
//
// As with sync.RWMutex, Lock, TryLock and Unlock are the writer's and
// RLock, TryRLock and RUnlock the reader's; RLocker gives the reader's
// forms as a Lockable, so that Do runs a function under a read hold. A
// handle holds at most one hold, read or write (an acquire while holding
// returns ErrAlreadyHeld); Token, Lease, Done, Err and Renew are the
// current (or last) hold's, whichever kind it is.
//
// It is built on Mutexes only. A gate, a Mutex on the derived key
// GateKey, orders everyone: a writer takes the gate, waits on the backend's
// notifications until no reader holds a reader slot, and keeps the gate for
// its whole hold (the writer's hold is the gate's). A reader takes the gate,
// takes a free reader slot (a Semaphore of readers permits on ReadKey), and
// gives the gate back; its hold is its slot's. So a reader arriving while a
// writer waits queues behind that writer on the gate: writers do not
// starve. Every hold is a Mutex hold, with its validity window, watchdog
// and loss signal.
//
// Fencing: a writer's token is its gate token; a reader's token is the gate
// token of its entry. So a writer's token is strictly greater than every
// token issued before it on the key, read or write, and a reader's token is
// greater than the token of every writer that held before it, and smaller
// than that of every writer after it. A resource keeps two marks: W, the
// highest writer token it accepted, and R, the highest reader token. It
// accepts a write iff token >= max(W, R) and raises W; it accepts a read
// iff token >= W and raises R to the larger of R and token (readers never
// refuse each other). fence.Rule states each check: Rule{Highest: max(W, R)}
// for a writer, Rule{Highest: W} for a reader. docs/rwmutex.md has the
// design, the order each backend's gate queue gives, and the cost.
//
// Every client of a key must use one number of readers: it is recorded
// with the reader slots, as a Semaphore's N is, and a client of another
// number is refused with ErrInvalidOption.
//
// As with sync.RWMutex, a holder of a read hold must not wait for a second
// one (on another handle) before it gives the first back: a writer that
// arrived in between waits for the first, and the second waits behind the
// writer.
//
// An RWMutex's methods are safe for concurrent use.
type RWMutex struct {
	l       *Locker
	key     string
	readers int
	wgate   *Mutex     // the gate, held by the writer for its hold
	rgate   *Mutex     // the gate, passed by a reader on entry (no minimum or maximum hold)
	slots   *Semaphore // the reader slots

	sem chan struct{} // serialises the acquires and releases

	mu    sync.Mutex
	mode  rwMode // the current hold's kind
	last  rwMode // the kind of the current or last hold, for Err
	entry Token  // a reader's token: the gate token of its entry
}

type rwMode int

const (
	rwNone rwMode = iota
	rwRead
	rwWrite
)

// rwGateKey and rwReadKey are the keys derived from an RWMutex's key, kept
// apart from a Semaphore's permit keys ("#permit/") and from each other.
func rwGateKey(key string) string { return key + "#rw/gate" }
func rwReadKey(key string) string { return key + "#rw/read" }

// NewRWMutex returns a handle on the read-write lock key that lets at most
// readers readers hold at once, made from l with opts (as for NewMutex:
// TTL, owner, observers, minimum and maximum hold, applied to every hold).
// Every client of key must use the same number of readers. readers outside
// [1, MaxPermits] is an ErrInvalidOption error; an empty or over-long key
// an ErrInvalidKey error.
func (l *Locker) NewRWMutex(key string, readers int, opts ...Option) (*RWMutex, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if readers < 1 || readers > MaxPermits {
		return nil, fmt.Errorf("%w: a read-write lock allows from 1 to %d readers, got %d", ErrInvalidOption, MaxPermits, readers)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkKey(permitKey(rwReadKey(key), readers)); err != nil {
		return nil, fmt.Errorf("%w: key too long for its derived keys", ErrInvalidKey)
	}
	wgate, err := l.NewMutex(rwGateKey(key), opts...)
	if err != nil {
		return nil, err
	}
	// A reader only passes the gate: a minimum hold would keep it shut to
	// everyone after the reader is through, a maximum hold is the slot's.
	ropts := append(append([]Option(nil), opts...), WithMinHold(0), WithMaxHold(0))
	rgate, err := l.NewMutex(rwGateKey(key), ropts...)
	if err != nil {
		return nil, err
	}
	slots, err := l.NewSemaphore(rwReadKey(key), readers, opts...)
	if err != nil {
		return nil, err
	}
	return &RWMutex{l: l, key: key, readers: readers, wgate: wgate, rgate: rgate, slots: slots, sem: make(chan struct{}, 1)}, nil
}

// Key returns the read-write lock's key.
func (rw *RWMutex) Key() string { return rw.key }

// Readers returns the most readers that may hold at once.
func (rw *RWMutex) Readers() int { return rw.readers }

// GateKey returns the key of the gate: the key a writer's Token fences on,
// and whose Token a reader's is.
func (rw *RWMutex) GateKey() string { return rw.wgate.Key() }

// ReadKey returns the key of the reader slots (a Semaphore's key).
func (rw *RWMutex) ReadKey() string { return rw.slots.Key() }

func (rw *RWMutex) errorf(op string, err error) error {
	if errors.Is(err, ErrInvalidOption) {
		// The record disagrees: say it in the read-write lock's terms.
		return fmt.Errorf("dlock: %s rwmutex %q with %d readers: every client of the key must use one number of readers (the readers are permits of the semaphore %q; Locker.ResetSemaphore on it changes the number once no client of the other runs): %w", op, rw.key, rw.readers, rw.ReadKey(), err)
	}
	return fmt.Errorf("dlock: %s rwmutex %q: %w", op, rw.key, err)
}

func (rw *RWMutex) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case rw.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rw *RWMutex) leave() { <-rw.sem }

func (rw *RWMutex) current() rwMode {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.mode
}

// hold returns the Hold behind the current hold, nil when none.
func (rw *RWMutex) hold() Hold {
	switch rw.current() {
	case rwWrite:
		return rw.wgate
	case rwRead:
		return rw.slots
	}
	return nil
}

func (rw *RWMutex) set(m rwMode, entry Token) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.mode, rw.entry = m, entry
	if m != rwNone {
		rw.last = m
	}
}

// settle checks the current hold before an acquire: a live one is
// ErrAlreadyHeld, an ended one is cleaned up. Called with sem held.
func (rw *RWMutex) settle(ctx context.Context) error {
	h := rw.hold()
	if h == nil {
		return nil
	}
	if !isDone(h.Done()) {
		return ErrAlreadyHeld
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
	defer cancel()
	_ = h.Unlock(rctx) // guarded: never frees a successor's hold
	rw.set(rwNone, 0)
	return nil
}

// Lock blocks until this RWMutex holds the lock as its writer, or ctx
// ends: it takes the gate, then waits, on the backend's notifications,
// until no reader holds. When ctx ends first it leaves nothing behind and
// returns an error matching ctx's error and ErrNotAcquired (or
// ErrUnavailable if the backend never answered).
func (rw *RWMutex) Lock(ctx context.Context) error { return rw.write(ctx, "lock", true) }

// TryLock makes one attempt at the writer's hold: it returns an error
// matching ErrNotAcquired if the gate is held or a reader holds.
func (rw *RWMutex) TryLock(ctx context.Context) error { return rw.write(ctx, "trylock", false) }

func (rw *RWMutex) write(ctx context.Context, op string, wait bool) error {
	if err := rw.enter(ctx); err != nil {
		return rw.errorf(op, err)
	}
	defer rw.leave()
	if err := rw.settle(ctx); err != nil {
		return rw.errorf(op, err)
	}
	if err := rw.slots.checkRecord(ctx); err != nil {
		return rw.errorf(op, err)
	}
	var err error
	if wait {
		err = rw.wgate.Lock(ctx)
	} else {
		err = rw.wgate.TryLock(ctx)
	}
	if err != nil {
		return rw.errorf(op, err)
	}
	if err := rw.waitReaders(ctx, wait); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
		defer cancel()
		_ = rw.wgate.Unlock(rctx)
		return rw.errorf(op, err)
	}
	rw.set(rwWrite, 0)
	return nil
}

// waitReaders returns once no reader slot is held, with the gate held (so
// no reader can take a slot meanwhile; one that took it with a gate it had
// lost gives it back without reporting a hold). A held slot is watched
// (the backend's notifications) and waited on until it is freed or its
// holder's lease runs out; without wait, a held slot is ErrNotAcquired.
func (rw *RWMutex) waitReaders(ctx context.Context, wait bool) error {
	for i := 0; i < rw.readers; i++ {
		if err := rw.waitSlot(ctx, permitKey(rw.slots.Key(), i), wait); err != nil {
			return err
		}
	}
	return nil
}

func (rw *RWMutex) waitSlot(ctx context.Context, key string, wait bool) error {
	info, err := rw.l.Inspect(ctx, key)
	if err != nil {
		return err
	}
	if !info.Held {
		return nil
	}
	if !wait {
		return fmt.Errorf("%w: a reader holds", ErrNotAcquired)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Watch, then look again: a release after Watch returned is never
		// missed.
		w, err := rw.l.drv.Watch(ctx, key)
		if err != nil {
			return classify(ctx, err, true)
		}
		info, err = rw.l.Inspect(ctx, key)
		if err != nil || !info.Held {
			_ = w.Close()
			return err
		}
		wait := rw.wgate.opts.ttl
		if info.Remaining > 0 {
			// Expiry publishes nothing: wake when the lease has run out.
			wait = info.Remaining + time.Millisecond
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-w.Changed():
		case <-timer.C:
		case <-rw.wgate.Done():
			_ = w.Close()
			if err := rw.wgate.Err(); err != nil {
				return err
			}
			return ErrLockLost
		case <-ctx.Done():
			_ = w.Close()
			return classify(ctx, ctx.Err(), true)
		case <-rw.l.closed:
			_ = w.Close()
			return ErrClosed
		}
		_ = w.Close()
	}
}

// RLock blocks until this RWMutex holds the lock as a reader, or ctx
// ends. It queues on the gate behind any writer already waiting, takes a
// reader slot (waiting for one when readers readers hold) and gives the
// gate back. Errors are as Lock's.
func (rw *RWMutex) RLock(ctx context.Context) error { return rw.read(ctx, "rlock", true) }

// TryRLock makes one attempt at a reader's hold: it returns an error
// matching ErrNotAcquired if a writer holds or waits, or every reader slot
// is held, and also while another reader is passing the gate (for the few
// round trips of its RLock): one attempt cannot tell that reader from a
// writer.
func (rw *RWMutex) TryRLock(ctx context.Context) error { return rw.read(ctx, "tryrlock", false) }

func (rw *RWMutex) read(ctx context.Context, op string, wait bool) error {
	if err := rw.enter(ctx); err != nil {
		return rw.errorf(op, err)
	}
	defer rw.leave()
	if err := rw.settle(ctx); err != nil {
		return rw.errorf(op, err)
	}
	for {
		retry, err := rw.readOnce(ctx, wait)
		if err == nil {
			return nil
		}
		if !retry || ctx.Err() != nil {
			return rw.errorf(op, err)
		}
	}
}

// readOnce passes the gate once. It reports retry when the gate was lost
// while the reader held it (a writer may then have seen its slot free): the
// slot is given back and the reader starts again.
func (rw *RWMutex) readOnce(ctx context.Context, wait bool) (retry bool, err error) {
	if wait {
		err = rw.rgate.Lock(ctx)
	} else {
		err = rw.rgate.TryLock(ctx)
	}
	if err != nil {
		return false, err
	}
	entry := rw.rgate.Token()
	if wait {
		err = rw.slots.Lock(ctx)
	} else {
		err = rw.slots.TryLock(ctx)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
	defer cancel()
	uerr := rw.rgate.Unlock(rctx)
	if err != nil {
		return false, err
	}
	if uerr != nil {
		_ = rw.slots.Unlock(rctx)
		if errors.Is(uerr, ErrLockLost) {
			if !wait {
				return false, fmt.Errorf("%w: the gate was lost while passing it (%w)", ErrNotAcquired, uerr)
			}
			return true, uerr
		}
		return false, uerr
	}
	rw.set(rwRead, entry)
	return false, nil
}

// Unlock ends the writer's hold. It returns ErrNotHeld when this RWMutex
// holds no writer's hold, and an error matching ErrLockLost when it was
// lost before Unlock. It gives the lock back even when ctx has ended.
func (rw *RWMutex) Unlock(ctx context.Context) error { return rw.release(ctx, "unlock", rwWrite) }

// RUnlock ends the reader's hold, as Unlock does the writer's.
func (rw *RWMutex) RUnlock(ctx context.Context) error { return rw.release(ctx, "runlock", rwRead) }

func (rw *RWMutex) release(ctx context.Context, op string, m rwMode) error {
	if rw.current() != m {
		return rw.errorf(op, ErrNotHeld)
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	if err := rw.enter(ctx); err != nil {
		return rw.errorf(op, err)
	}
	defer rw.leave()
	if rw.current() != m {
		return rw.errorf(op, ErrNotHeld)
	}
	h := rw.hold()
	rw.set(rwNone, 0)
	if err := h.Unlock(ctx); err != nil {
		return rw.errorf(op, err)
	}
	return nil
}

// Token returns the fencing token of the current hold, 0 if none: a
// writer's is its gate token, a reader's the gate token of its entry (see
// the type's documentation for how a resource checks each).
func (rw *RWMutex) Token() Token {
	rw.mu.Lock()
	mode, entry := rw.mode, rw.entry
	rw.mu.Unlock()
	switch mode {
	case rwWrite:
		return rw.wgate.Token()
	case rwRead:
		if rw.slots.Token() != 0 {
			return entry
		}
	}
	return 0
}

// Lease returns the current hold's lease, with Token as Token returns it;
// the zero Lease if none.
func (rw *RWMutex) Lease() Lease {
	rw.mu.Lock()
	mode, entry := rw.mode, rw.entry
	rw.mu.Unlock()
	switch mode {
	case rwWrite:
		return rw.wgate.Lease()
	case rwRead:
		ls := rw.slots.Lease()
		if ls.Token != 0 {
			ls.Token = entry
		}
		return ls
	}
	return Lease{}
}

// Done returns a channel closed when the current hold ends: by Unlock or
// RUnlock, by Close of the Locker, or by loss (signalled before the lease
// can expire on the server). With no hold it returns an already-closed
// channel.
func (rw *RWMutex) Done() <-chan struct{} {
	if h := rw.hold(); h != nil {
		return h.Done()
	}
	return closedChan
}

// Err reports why the last hold ended, as Mutex.Err does: nil while held
// or if none was ever held, ErrUnlocked, ErrClosed, or an error matching
// ErrLockLost and the kind of loss.
func (rw *RWMutex) Err() error {
	rw.mu.Lock()
	last := rw.last
	rw.mu.Unlock()
	switch last {
	case rwWrite:
		return rw.wgate.Err()
	case rwRead:
		return rw.slots.Err()
	}
	return nil
}

// Renew extends the current hold's lease to a full TTL from now (the
// watchdog does it on its own). It returns ErrNotHeld when nothing is
// held and an error matching ErrLockLost when the hold was lost.
func (rw *RWMutex) Renew(ctx context.Context) error {
	h := rw.hold()
	if h == nil {
		return rw.errorf("renew", ErrNotHeld)
	}
	if err := h.Renew(ctx); err != nil {
		return rw.errorf("renew", err)
	}
	return nil
}

// RLocker returns a Lockable whose Lock, TryLock and Unlock are rw's
// RLock, TryRLock and RUnlock, and whose other methods are rw's: Do(ctx,
// rw.RLocker(), fn) runs fn under a read hold.
func (rw *RWMutex) RLocker() Lockable { return rlocker{rw} }

type rlocker struct{ *RWMutex }

func (r rlocker) Lock(ctx context.Context) error    { return r.RLock(ctx) }
func (r rlocker) TryLock(ctx context.Context) error { return r.TryRLock(ctx) }
func (r rlocker) Unlock(ctx context.Context) error  { return r.RUnlock(ctx) }
