// Package memory is dlock's in-process backend (scheme mem://).
//
// It is the reference implementation of the driver contract and the
// embedded default: complete (leases that expire, renewal, fencing tokens,
// loss signals, a queue of waiters) but limited to one process. Locks
// in a Store exclude each other across every Locker made on that Store.
//
// # Waiting
//
// Waiting Locks stand in a line per key, first come first served
// (driver.Acquirer): a Lock that finds the key held, or others already
// waiting, joins the back of the line, and a release, an expiry or a
// Break hands the key straight to the first in line, with a new token
// and a whole lease from the hand-off. Only that waiter wakes, and it
// wakes holding the key. Nobody takes a key that has a line: not a Lock
// arriving as it is released, nor a TryLock, nor the holder that just
// released it and locks again (the conformance case LineOrder). So no waiter starves:
// with n Locks waiting, a Lock gets the key after at most n holds
// (LineFairness). This trades the throughput a barging lock wins when
// the releaser takes the key straight back for a wait bounded by the line
// ahead. A Lock whose context ends, or whose Locker closes, leaves the
// line before it returns; a hand-off that comes at that moment wins, and
// the Lock returns holding the key. Inspect's Waiters counts the line.
//
// Each entry keeps the holder's description (dlock.WithOwner) beside its
// owner ID and token. Inspect reads the entry (an expired one is free).
// Break, like Store.Break, drops the entry and closes the holder's loss
// channel at once, and hands the key to the first waiter; the Store's
// counter gives the next holder a higher token.
//
// Open("mem://") and Open("mem://NAME") use a Store shared by the whole
// process under that name, so that two parts of one program configured with
// the same URL exclude each other. This named-store table is the package's
// only global state. For isolation (tests), make a Store with NewStore and
// Lockers with New.
//
// Fencing tokens are max(previous token + 1, wall clock in microseconds),
// one counter per Store, so they increase within a process and also from
// one process (or Store) to the next: a fence that outlives the process
// (a table in a database) accepts the next process's holders
// (TestTokensIncreaseAcrossProcesses). The one assumption: the wall clock
// does not step back, between the last acquisition of one process and
// the first of the next, by more than the time between them. There is no
// server, so no failover, snapshot or partition to survive; a process
// that ends takes its locks with it.
//
// The longest TTL is MaxTTL (10 years, dlock.MaxTTL); a longer one is
// refused with dlock.ErrInvalidOption when the Locker or Mutex is made.
//
// # Minimum hold
//
// A minimum hold (dlock.WithMinHold, driver.Lapser) released early moves
// the entry's expiry to the end of the minimum; the entry lives in the
// Store, so closing the Locker does not shorten it (a process that ends
// takes its Stores with it).
package memory

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "mem"

func init() { dlock.Register(Scheme, open) }

var named = struct {
	sync.Mutex
	m map[string]*Store
}{m: map[string]*Store{}}

func open(ctx context.Context, u *url.URL) (driver.Locker, error) {
	if u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("%w: mem://NAME takes no path, got %q", driver.ErrInvalidURL, u.Path)
	}
	if u.User != nil || u.Port() != "" {
		return nil, fmt.Errorf("%w: mem://NAME takes only a store name", driver.ErrInvalidURL)
	}
	if err := driver.NewParams(u).Done(); err != nil {
		return nil, err
	}
	named.Lock()
	s := named.m[u.Host]
	if s == nil {
		s = NewStore()
		named.m[u.Host] = s
	}
	named.Unlock()
	return s.driver(), nil
}

// Store holds the locks of one in-process namespace.
type Store struct {
	mu    sync.Mutex
	locks map[string]*entry
	subs  map[string]map[*watch]struct{}
	// seq is the fencing counter, shared by all keys (so monotone per key
	// too): max(seq + 1, wall clock in µs) at each acquisition, so that a
	// new process (a new Store) goes on above the tokens an earlier one
	// issued, for a fence that outlives the process.
	seq uint64
	// records are the keys' records (driver.Recorder), apart from locks.
	records map[string]string
	// lines are the keys' waiting Locks, first in line first (queue.go).
	lines map[string]*line
}

type entry struct {
	key     string
	owner   string
	meta    string // Request.Meta, for Inspect
	token   uint64
	expires time.Time
	timer   *time.Timer
	// lost is marked when the entry ends other than by its owner's
	// release; its channel is the hold's Lost, and OnLost hangs the
	// portable layer's callback on it (no goroutine per hold).
	lost driver.Loss
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{locks: map[string]*entry{}, subs: map[string]map[*watch]struct{}{}, records: map[string]string{},
		lines: map[string]*line{}}
}

// New returns a Locker over s. Lockers on one Store behave like separate
// processes using one server.
func New(s *Store, opts ...dlock.Option) (*dlock.Locker, error) {
	return dlock.NewLocker(s.driver(), opts...)
}

// Break ends key's current hold from outside, as an operator deleting a
// lock would: the holder's Done channel closes and waiters are woken. It
// reports whether the key was held.
func (s *Store) Break(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.locks[key]
	if e == nil {
		return false
	}
	s.drop(e, true)
	return true
}

// drop removes e, closing its lost channel when it did not end by release,
// hands the key to the first waiting Lock, if any, and wakes the key's
// watchers. Called with s.mu held.
func (s *Store) drop(e *entry, lost bool) {
	if s.locks[e.key] != e {
		return
	}
	delete(s.locks, e.key)
	e.timer.Stop()
	if lost {
		e.lost.Mark()
	}
	s.handOff(e.key, time.Now())
	for w := range s.subs[e.key] {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// current returns key's live entry, dropping it first if it has expired
// (which hands the key to its first waiter, whose entry is then the live
// one).
func (s *Store) current(key string, now time.Time) *entry {
	e := s.locks[key]
	if e != nil && !now.Before(e.expires) {
		s.drop(e, true)
		return s.locks[key]
	}
	return e
}

func (s *Store) driver() *memDriver { return &memDriver{s: s, closed: make(chan struct{})} }

// Driver returns a new driver-level Locker over s, for wrapping in
// middleware (instrumentation, fault injection) before dlock.NewLocker.
func (s *Store) Driver() driver.Locker { return s.driver() }

// memDriver is one Locker's view of a Store.
type memDriver struct {
	s         *Store
	closeOnce sync.Once
	closed    chan struct{}
}

var (
	_ driver.Locker       = (*memDriver)(nil)
	_ driver.Inspector    = (*memDriver)(nil)
	_ driver.BatchRenewer = (*memDriver)(nil)
	_ driver.LossNotifier = (*memDriver)(nil)
	_ driver.Recorder     = (*memDriver)(nil)
	_ driver.Limiter      = (*memDriver)(nil)
	_ driver.Acquirer     = (*memDriver)(nil)
)

// MaxTTL is the longest lease mem:// grants: dlock.MaxTTL, 10 years. A
// lease here is a time.Time deadline and a runtime timer, which saturate
// rather than overflow, so dlock's own limit is the only one.
const MaxTTL = dlock.MaxTTL

// Limits reports the longest lease, MaxTTL.
func (d *memDriver) Limits() driver.Limits { return driver.Limits{MaxTTL: MaxTTL} }

// Record keeps value as key's record unless it has one; records live as
// long as the Store.
func (d *memDriver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("memory: %w", err)
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if v, ok := d.s.records[key]; ok {
		return v, nil
	}
	d.s.records[key] = value
	return value, nil
}

// ClearRecord deletes key's record if it is value.
func (d *memDriver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("memory: %w", err)
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if v, ok := d.s.records[key]; !ok || v != value {
		return false, nil
	}
	delete(d.s.records, key)
	return true, nil
}

// Inspect reports key's live entry; an expired one counts as free.
func (d *memDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	now := time.Now()
	e := d.s.current(key, now) // an expired entry goes, as its timer would drop it
	if e == nil {
		return driver.Info{Waiters: d.s.waiters(key)}, nil
	}
	return e.info(now, d.s.waiters(key)), nil
}

// Break drops key's live entry as Store.Break does: its holder's Lost
// channel closes at once. The shared counter keeps the next token higher.
func (d *memDriver) Break(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	now := time.Now()
	e := d.s.current(key, now)
	if e == nil {
		return driver.Info{Waiters: d.s.waiters(key)}, nil
	}
	info := e.info(now, d.s.waiters(key))
	d.s.drop(e, true)
	return info, nil
}

func (e *entry) info(now time.Time, waiters int) driver.Info {
	return driver.Info{Held: true, Token: e.token, Remaining: e.expires.Sub(now), Meta: e.meta, Waiters: waiters}
}

func (d *memDriver) check(ctx context.Context) error {
	select {
	case <-d.closed:
		return driver.ErrClosed
	default:
	}
	return ctx.Err()
}

func (d *memDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if e := s.current(req.Key, now); e != nil {
		return driver.Hold{}, &driver.HeldError{Remaining: e.expires.Sub(now)}
	}
	return s.grant(req, now), nil
}

// grant makes req the holder of its key, free at now. s.mu held.
func (s *Store) grant(req driver.Request, now time.Time) driver.Hold {
	s.seq = max(s.seq+1, uint64(now.UnixMicro()))
	e := &entry{key: req.Key, owner: req.Owner, meta: req.Meta, token: s.seq, expires: now.Add(req.TTL)}
	e.timer = time.AfterFunc(req.TTL, func() { s.expire(e) })
	s.locks[req.Key] = e
	return driver.Hold{Token: e.token, TTL: req.TTL, Since: now, Lost: e.lost.Chan(), State: e}
}

// expire runs when an entry's lease may have run out.
func (s *Store) expire(e *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks[e.key] == e && !time.Now().Before(e.expires) {
		s.drop(e, true)
	}
}

// owned returns h's entry if it is still the live hold of its key.
func (s *Store) owned(h driver.Hold) (*entry, error) {
	e, _ := h.State.(*entry)
	if e == nil {
		return nil, fmt.Errorf("memory: foreign hold: %w", driver.ErrNotHeld)
	}
	if s.current(e.key, time.Now()) != e {
		return nil, driver.ErrNotHeld
	}
	return e, nil
}

func (d *memDriver) Release(ctx context.Context, h driver.Hold) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	e, err := d.s.owned(h)
	if err != nil {
		return err
	}
	d.s.drop(e, false)
	return nil
}

func (d *memDriver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	e, err := d.s.owned(h)
	if err != nil {
		return 0, err
	}
	return e.extend(h.TTL), nil
}

// extend gives e a full ttl from now. s.mu held.
func (e *entry) extend(ttl time.Duration) time.Duration {
	e.expires = time.Now().Add(ttl)
	e.timer.Reset(ttl)
	return ttl
}

// RenewBatch renews hs under one acquisition of the Store's mutex, each
// exactly as Renew would.
func (d *memDriver) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(hs)), make([]error, len(hs))
	if err := d.check(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return ttls, errs
	}
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	for i, h := range hs {
		e, err := d.s.owned(h)
		if err != nil {
			errs[i] = err
			continue
		}
		ttls[i] = e.extend(h.TTL)
	}
	return ttls, errs
}

// OnLost calls f, in a goroutine of its own, when h's entry ends other
// than by its release (expiry, Break), so a hold costs no goroutine while
// it lasts.
func (d *memDriver) OnLost(h driver.Hold, f func()) func() bool {
	e, _ := h.State.(*entry)
	if e == nil {
		return driver.ForeignLost(f)
	}
	return e.lost.OnLost(f)
}

type watch struct {
	s   *Store
	key string
	ch  chan struct{}
}

func (d *memDriver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	w := &watch{s: s, key: key, ch: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.subs[key] == nil {
		s.subs[key] = map[*watch]struct{}{}
	}
	s.subs[key][w] = struct{}{}
	return w, nil
}

func (w *watch) Changed() <-chan struct{} { return w.ch }

func (w *watch) Close() error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	delete(w.s.subs[w.key], w)
	if len(w.s.subs[w.key]) == 0 {
		delete(w.s.subs, w.key)
	}
	return nil
}

func (d *memDriver) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	return nil
}

// Scheme names the backend for observers (observe.Call.Backend) when the
// Locker is made by New rather than by dlock.Open.
func (d *memDriver) Scheme() string { return Scheme }
