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
// holders at a time, across processes, on any backend.
//
// # Design
//
// The N permits are N permit slots, each an ordinary lock on its own key
// (PermitKey: the semaphore's key, "#permit/", the slot number). A permit
// is a hold of one slot, so it is a Mutex hold in every respect: a lease
// renewed by the watchdog, a fencing token strictly greater than the
// slot's previous holder's (fence on PermitKey with Token), a loss signal
// (Done, Err) closed before the lease can expire on the server. Never more
// than N holders inside their validity windows follows from exclusion on
// each of the N slot keys; nothing else has to be trusted. A holder that
// crashes gives its slot back when its lease runs out.
//
// Acquire tries the slots once each, from a random one on, and when all
// are taken waits for every slot at once, each with Mutex.Lock: on the
// backend's notifications (pub/sub on Redis, a queue entry watched on etcd
// and ZooKeeper, blocking queries on Consul, LISTEN on PostgreSQL) and on
// a timer at the holder's remaining lease (an expiry publishes nothing).
// The first slot granted is kept, the other waits are called off, and a
// slot granted meanwhile is given back: waiters are notified, never polled
// on a fixed interval.
//
// Ideas taken: from Redisson's RPermitExpirableSemaphore, that each
// permit is an entry of its own with its own expiry, released only by its
// holder (here a lease on a slot key, with its own fencing token; Redisson
// keeps the count on the server, set once by trySetPermits). From Consul's
// semaphore, that the limit is recorded with the holders and a client
// whose limit differs is refused (Consul keeps it in the one lock key that
// every acquire updates by check-and-set; here it is a record of its own,
// written once, so acquires do not serialise on it). Curator's
// InterProcessSemaphoreV2 (a mutex guarding the creation of lease nodes
// and a count of them, N each client's own unless a shared count node is
// used) shows the failure the check guards against: clients with
// different N mixing silently.
//
// # Clients that disagree on N
//
// The key's record (driver.Recorder, kept by every dlock backend apart
// from the key's locks) holds N: "permits=N". Every Acquire and
// TryAcquire writes it if the key has none, or reads it, before it takes
// a permit, and returns an error matching
// ErrInvalidOption if it says another number. The record is a
// create-if-absent as linearizable as the backend's locks, so of clients
// that disagree on N, those of one number are refused before they hold
// anything, whatever the order and timing. It outlives every permit:
// ResetSemaphore deletes it, for a deployment that changes N once no
// client of the old number runs.
//
// A second check remains, for a Locker whose driver keeps no records (a
// third-party driver) and as a backstop: every permit's owner description
// (Inspect, WithOwner) starts with "permits=N ", and after taking a slot,
// Acquire inspects every other slot of its own N and the slot just past
// them, and gives its permit back with an ErrInvalidOption error if a
// holder's N differs, or if that next slot is held. Alone, that check
// leaves a window: a client with a larger N holding only slots numbered
// above the smaller N is not seen by the smaller clients.
//
// # Cost
//
// Every Acquire first reads (or writes) the record: one round trip (one
// per instance, in parallel, on Redlock). An Acquire with
// a slot free costs one acquisition per slot tried (one round trip on
// Redis, see MultiMutex for the others) plus N inspections, one round trip
// each, for the second check; when every slot is taken, N
// attempts, then N Locks at once (N waits on the server: N subscriptions
// on Redis, N queue entries on etcd and ZooKeeper, N blocking queries on
// Consul, and N goroutines in the process), called off when one is granted.
// Release is one release. The watchdog renews the permit (one
// renewal every TTL/3). Keep N small (at most MaxPermits).
//
// A Semaphore's methods are safe for concurrent use; it holds at most one
// permit (Acquire while holding returns ErrAlreadyHeld). Make one
// Semaphore per permit a process wants to hold.
type Semaphore struct {
	l     Locker
	key   string
	n     int
	slots []Mutex

	sem chan struct{} // serialises Acquire, TryAcquire and Release

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
func NewSemaphore(l Locker, key string, permits int, opts ...Option) (*Semaphore, error) {
	if l == nil {
		return nil, fmt.Errorf("%w: NewSemaphore with a nil Locker", ErrInvalidOption)
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
	// default (when l is the portable Locker itself) or the options'.
	o := defaultOptions()
	if pl, ok := l.(*locker); ok {
		o = pl.defaults
	}
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
func (s *Semaphore) held() Mutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur < 0 {
		return nil
	}
	return s.slots[s.cur]
}

// lastSlot returns the slot Mutex of the current or last permit.
func (s *Semaphore) lastSlot() Mutex {
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

// Acquire blocks until this Semaphore holds a permit or ctx ends. When ctx
// ends first it leaves nothing behind and returns an error matching ctx's
// error and ErrNotAcquired (every permit was held), or ErrUnavailable if
// the backend never answered. A disagreement on N is an ErrInvalidOption
// error; Close of the Locker makes it return ErrClosed at once.
func (s *Semaphore) Acquire(ctx context.Context) error {
	return s.acquire(ctx, "acquire", true)
}

// TryAcquire tries every permit slot once and returns an error matching
// ErrNotAcquired if all N are held.
func (s *Semaphore) TryAcquire(ctx context.Context) error {
	return s.acquire(ctx, "tryacquire", false)
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

// Release gives the permit back. It returns ErrNotHeld when this Semaphore
// holds none, and an error matching ErrLockLost when the permit was lost
// before Release. As Mutex.Unlock, it gives the permit back even when ctx
// has ended.
func (s *Semaphore) Release(ctx context.Context) error {
	if s.held() == nil {
		return s.errorf("release", ErrNotHeld)
	}
	ctx, cancel := releaseContext(ctx)
	defer cancel()
	if err := s.enter(ctx); err != nil {
		return s.errorf("release", err)
	}
	defer s.leave()
	m := s.held()
	if m == nil {
		return s.errorf("release", ErrNotHeld)
	}
	s.mu.Lock()
	s.cur = -1
	s.mu.Unlock()
	if err := m.Unlock(ctx); err != nil {
		return s.errorf("release", err)
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

// Done returns a channel closed when the permit ends: by Release, by Close
// of the Locker, or by loss (signalled before the lease can expire on the
// server). With no permit it returns an already-closed channel.
func (s *Semaphore) Done() <-chan struct{} {
	if m := s.held(); m != nil {
		return m.Done()
	}
	return closedChan
}

// Err reports why the last permit ended, as Mutex.Err does for a hold: nil
// while held or if none was ever held, ErrUnlocked after Release,
// ErrClosed, or an error matching ErrLockLost and the kind of loss.
func (s *Semaphore) Err() error {
	if m := s.lastSlot(); m != nil {
		return m.Err()
	}
	return nil
}
