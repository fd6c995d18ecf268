package dlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlock-go/dlock/driver"
)

// MaxPermits is the largest number of permits a Semaphore may have.
const MaxPermits = 1024

// Semaphore is one holder's handle on a counting semaphore: at most N
// holders at a time, across processes, on any backend. Make one with
// Locker.NewSemaphore.
//
// Its permits are N permit slots, each an ordinary lock on its own key
// (PermitKey), so a permit is a Mutex hold in every respect: a lease renewed
// by the watchdog, a fencing token per slot (fence on PermitKey with Token),
// a loss signal (Done, Err) closed before the lease can expire on the
// server. Lock tries the slots once each, then waits on all of them at once
// on the backend's notifications. Every client of a key must use one N: the
// key's record (written once, read by every Lock) refuses a client of
// another number with ErrInvalidOption before it holds anything.
// docs/semaphore.md has the design, the ideas taken from Redisson, Consul and
// Curator, and the cost per backend.
//
// A Semaphore's methods are safe for concurrent use; it holds at most one
// permit (Lock while holding returns ErrAlreadyHeld). Make one Semaphore
// per permit a process wants to hold.
type Semaphore struct {
	l     *Locker
	key   string
	n     int
	slots []*Mutex

	sem chan struct{} // serialises Lock, TryLock and Unlock

	mu   sync.Mutex
	cur  int // the slot held, -1 when none
	last int // the slot of the last permit, for Err; -1 before any
}

// permitKey is the key of permit slot i.
func permitKey(key string, i int) string { return key + "#permit/" + strconv.Itoa(i) }

// permitTag is what every permit's owner description starts with.
func permitTag(n int) string { return "permits=" + strconv.Itoa(n) + " " }

// permitsOf reads N from a permit's owner description; false if it has
// none (the slot key was locked by something that is not a Semaphore).
func permitsOf(meta string) (int, bool) {
	rest, ok := strings.CutPrefix(meta, "permits=")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// NewSemaphore returns a handle on the semaphore key with the given number
// of permits, made from l with opts (as for NewMutex: TTL, owner,
// observers, applied to every permit). Every client of key must use the
// same number of permits (see the type's documentation). permits outside
// [1, MaxPermits] is an ErrInvalidOption error; an empty or over-long key
// an ErrInvalidKey error.
func (l *Locker) NewSemaphore(key string, permits int, opts ...Option) (*Semaphore, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if permits < 1 || permits > MaxPermits {
		return nil, fmt.Errorf("%w: a semaphore needs from 1 to %d permits, got %d", ErrInvalidOption, MaxPermits, permits)
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := checkKey(permitKey(key, permits)); err != nil {
		return nil, fmt.Errorf("%w: key too long for its permit keys", ErrInvalidKey)
	}
	// The owner description the permits would have had: the Locker's
	// default or the options'.
	o := l.defaults
	for _, opt := range opts {
		opt(&o)
	}
	if !o.metaSet && o.meta == "" {
		o.meta = defaultOwner()
	}
	if err := validOwner(o.meta); err != nil {
		return nil, err
	}
	meta := permitTag(permits) + o.meta
	if len(meta) > driver.MaxMetaLen {
		meta = meta[:driver.MaxMetaLen]
		for !utf8.ValidString(meta) {
			meta = meta[:len(meta)-1]
		}
	}
	mopts := append(append([]Option(nil), opts...), WithOwner(meta))
	s := &Semaphore{l: l, key: key, n: permits, sem: make(chan struct{}, 1), cur: -1, last: -1}
	for i := 0; i < permits; i++ {
		m, err := l.NewMutex(permitKey(key, i), mopts...)
		if err != nil {
			return nil, err
		}
		s.slots = append(s.slots, m)
	}
	return s, nil
}

// Key returns the semaphore's key.
func (s *Semaphore) Key() string { return s.key }

// Permits returns N, the number of permits.
func (s *Semaphore) Permits() int { return s.n }

func (s *Semaphore) errorf(op string, err error) error {
	return fmt.Errorf("dlock: %s semaphore %q: %w", op, s.key, err)
}

func (s *Semaphore) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Semaphore) leave() { <-s.sem }

// held returns the slot Mutex of the current permit, nil when none.
func (s *Semaphore) held() *Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur < 0 {
		return nil
	}
	return s.slots[s.cur]
}

// lastSlot returns the slot Mutex of the current or last permit.
func (s *Semaphore) lastSlot() *Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last < 0 {
		return nil
	}
	return s.slots[s.last]
}

// settle checks the current permit before an acquire: a live one is
// ErrAlreadyHeld, a lost one is cleaned up. Called with sem held.
func (s *Semaphore) settle(ctx context.Context) error {
	m := s.held()
	if m == nil {
		return nil
	}
	if !isDone(m.Done()) {
		return ErrAlreadyHeld
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
	defer cancel()
	_ = m.Unlock(rctx) // guarded: never frees a successor's permit
	s.mu.Lock()
	s.cur = -1
	s.mu.Unlock()
	return nil
}

// Lock blocks until this Semaphore holds a permit or ctx ends. When ctx
// ends first it leaves nothing behind and returns an error matching ctx's
// error and ErrNotAcquired (every permit was held), or ErrUnavailable if
// the backend never answered. A disagreement on N is an ErrInvalidOption
// error; Close of the Locker makes it return ErrClosed at once.
func (s *Semaphore) Lock(ctx context.Context) error {
	return s.acquire(ctx, "lock", true)
}

// TryLock tries every permit slot once and returns an error matching
// ErrNotAcquired if all N are held.
func (s *Semaphore) TryLock(ctx context.Context) error {
	return s.acquire(ctx, "trylock", false)
}

func (s *Semaphore) acquire(ctx context.Context, op string, wait bool) error {
	if err := s.enter(ctx); err != nil {
		return s.errorf(op, err)
	}
	defer s.leave()
	if err := s.settle(ctx); err != nil {
		return s.errorf(op, err)
	}
	if err := s.checkRecord(ctx); err != nil {
		return s.errorf(op, err)
	}
	err := s.tryAll(ctx)
	if err != nil && wait && errors.Is(err, ErrNotAcquired) && ctx.Err() == nil {
		err = s.waitAny(ctx)
	}
	if err != nil {
		return s.errorf(op, err)
	}
	return nil
}

// tryAll tries each slot once, from a random one on, and keeps the first
// it gets (after the check).
func (s *Semaphore) tryAll(ctx context.Context) error {
	start := rand.IntN(s.n)
	for j := 0; j < s.n; j++ {
		i := (start + j) % s.n
		err := s.slots[i].TryLock(ctx)
		if err == nil {
			return s.check(ctx, i)
		}
		if !errors.Is(err, ErrNotAcquired) {
			return err
		}
	}
	return fmt.Errorf("%w: all %d permits are held", ErrNotAcquired, s.n)
}

// waitAny waits for every slot at once, each with Mutex.Lock (so on the
// backend's notifications, and on queue backends in the server's queue),
// keeps the first slot granted and gives back any other granted before the
// rest were called off.
func (s *Semaphore) waitAny(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		i   int
		err error
	}
	results := make(chan result, s.n)
	for i, m := range s.slots {
		go func() { results <- result{i, m.Lock(wctx)} }()
	}
	won := -1
	var failed error
	for range s.slots {
		r := <-results
		switch {
		case r.err == nil && won < 0 && failed == nil:
			won = r.i
			cancel()
		case r.err == nil: // granted too late: give it back
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
			_ = s.slots[r.i].Unlock(rctx)
			rcancel()
		case won >= 0 || failed != nil:
			// called off
		default:
			failed = r.err
			cancel()
		}
	}
	if won < 0 {
		return failed
	}
	return s.check(ctx, won)
}

// check looks for clients that disagree on N, after taking slot i (see
// the type's documentation). On a disagreement, or if the other slots
// cannot be read, it gives the permit back.
func (s *Semaphore) check(ctx context.Context, i int) error {
	m := s.slots[i]
	var bad error
	for j := 0; j <= s.n && bad == nil; j++ {
		if j == i {
			continue
		}
		info, err := s.l.Inspect(ctx, permitKey(s.key, j))
		switch {
		case err != nil:
			bad = fmt.Errorf("checking the other permits: %w", err)
		case !info.Held:
		case j == s.n:
			bad = fmt.Errorf("%w: permit slot %d is held (by %q): another client uses more than %d permits", ErrInvalidOption, j, info.Owner, s.n)
		default:
			if n, ok := permitsOf(info.Owner); !ok || n != s.n {
				bad = fmt.Errorf("%w: permit slot %d is held by a client that uses %s, this one %d permits (%q)", ErrInvalidOption, j, describePermits(n, ok), s.n, info.Owner)
			}
		}
	}
	if bad != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeReleaseTimeout)
		defer cancel()
		_ = m.Unlock(rctx)
		return bad
	}
	s.mu.Lock()
	s.cur, s.last = i, i
	s.mu.Unlock()
	return nil
}

func describePermits(n int, ok bool) string {
	if !ok {
		return "no permit count (a plain lock on the permit key)"
	}
	return strconv.Itoa(n)
}

// Unlock gives the permit back. It returns ErrNotHeld when this Semaphore
// holds none, and an error matching ErrLockLost when the permit was lost
// before Unlock. As Mutex.Unlock, it gives the permit back even when ctx
// has ended.
func (s *Semaphore) Unlock(ctx context.Context) error {
	if s.held() == nil {
		return s.errorf("unlock", ErrNotHeld)
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	if err := s.enter(ctx); err != nil {
		return s.errorf("unlock", err)
	}
	defer s.leave()
	m := s.held()
	if m == nil {
		return s.errorf("unlock", ErrNotHeld)
	}
	s.mu.Lock()
	s.cur = -1
	s.mu.Unlock()
	if err := m.Unlock(ctx); err != nil {
		return s.errorf("unlock", err)
	}
	return nil
}

// Slot returns the number of the permit slot held, from 0 to N-1; -1 when
// none is held.
func (s *Semaphore) Slot() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// PermitKey returns the key of the permit held ("" when none): the key a
// fence checks Token against (tokens increase per permit slot).
func (s *Semaphore) PermitKey() string {
	if m := s.held(); m != nil {
		return m.Key()
	}
	return ""
}

// Token returns the fencing token of the permit held, 0 if none. It is
// strictly greater than the token of every earlier holder of the same
// permit slot (PermitKey).
func (s *Semaphore) Token() Token {
	if m := s.held(); m != nil {
		return m.Token()
	}
	return 0
}

// Lease returns the permit's lease; the zero Lease if none is held.
func (s *Semaphore) Lease() Lease {
	if m := s.held(); m != nil {
		return m.Lease()
	}
	return Lease{}
}

// Done returns a channel closed when the permit ends: by Unlock, by Close
// of the Locker, or by loss (signalled before the lease can expire on the
// server). With no permit it returns an already-closed channel.
func (s *Semaphore) Done() <-chan struct{} {
	if m := s.held(); m != nil {
		return m.Done()
	}
	return closedChan
}

// Err reports why the last permit ended, as Mutex.Err does for a hold: nil
// while held or if none was ever held, ErrUnlocked after Unlock,
// ErrClosed, or an error matching ErrLockLost and the kind of loss.
func (s *Semaphore) Err() error {
	if m := s.lastSlot(); m != nil {
		return m.Err()
	}
	return nil
}

// Renew extends the permit's lease to a full TTL from now (the watchdog
// does it on its own). It returns ErrNotHeld when no permit is held and an
// error matching ErrLockLost when it was lost.
func (s *Semaphore) Renew(ctx context.Context) error {
	m := s.held()
	if m == nil {
		return s.errorf("renew", ErrNotHeld)
	}
	if err := m.Renew(ctx); err != nil {
		return s.errorf("renew", err)
	}
	return nil
}
