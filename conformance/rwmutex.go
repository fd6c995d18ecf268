package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// The read-write lock cases: readers share, a writer excludes readers and
// writers, a waiting writer is not starved by a stream of readers (and on a
// backend with a server queue, readers that came after it are served after
// it), a writer's token is above every earlier token, a hold broken from
// outside is a loss, Close ends holds and waits, bad input is refused.

func (s *suite) rwmutexCases() []namedCase {
	return []namedCase{
		{"RWMutexShare", s.rwShare},
		{"RWMutexExclusion", s.rwExclusion},
		{"RWMutexStarvation", s.rwStarvation},
		{"RWMutexOrder", s.rwOrder},
		{"RWMutexFencing", s.rwFencing},
		{"RWMutexLoss", s.rwLoss},
		{"RWMutexExpiry", s.rwExpiry},
		{"RWMutexClose", s.rwClose},
		{"RWMutexErrors", s.rwErrors},
	}
}

func mustRW(t testing.TB, l *dlock.Locker, key string, readers int, opts ...dlock.Option) *dlock.RWMutex {
	t.Helper()
	rw, err := l.NewRWMutex(key, readers, opts...)
	if err != nil {
		t.Fatalf("NewRWMutex(%q, %d): %v", key, readers, err)
	}
	return rw
}

// RWMutexShare: readers of several Lockers hold at once, up to the
// number of readers; a writer and one reader too many are refused; Do runs
// under a read hold through RLocker.
func (s *suite) rwShare(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.longTTL()
	var rs []*dlock.RWMutex
	for i := 0; i < 3; i++ {
		rw := mustRW(t, s.locker(t), key, 3, dlock.WithTTL(ttl))
		if err := rw.RLock(ctx); err != nil {
			t.Fatalf("RLock of reader %d: %v", i, err)
		}
		if rw.Token() == 0 || rw.Lease().Token != rw.Token() || !rw.Lease().Valid() || isClosed(rw.Done()) || rw.Err() != nil {
			t.Fatalf("reader %d holding: Token %d, Lease %+v, Done closed %v, Err %v", i, rw.Token(), rw.Lease(), isClosed(rw.Done()), rw.Err())
		}
		rs = append(rs, rw)
	}
	if err := rs[0].RLock(ctx); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("RLock while holding: %v; want ErrAlreadyHeld", err)
	}
	if err := rs[0].Lock(ctx); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("Lock while holding a read: %v; want ErrAlreadyHeld", err)
	}
	if err := rs[0].Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock of a read hold: %v; want ErrNotHeld", err)
	}
	other := mustRW(t, s.locker(t), key, 3, dlock.WithTTL(ttl))
	if err := other.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryRLock of a fourth reader with 3 allowed: %v; want ErrNotAcquired", err)
	}
	if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a writer while readers hold: %v; want ErrNotAcquired", err)
	}
	if other.Token() != 0 || !isClosed(other.Done()) {
		t.Fatal("refused: want token 0 and Done closed")
	}
	done := rs[2].Done()
	if err := rs[2].RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	if !isClosed(done) || !errors.Is(rs[2].Err(), dlock.ErrUnlocked) || rs[2].Token() != 0 {
		t.Fatalf("after RUnlock: Done closed %v, Err %v, Token %d", isClosed(done), rs[2].Err(), rs[2].Token())
	}
	if err := rs[2].RUnlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("RUnlock twice: %v; want ErrNotHeld", err)
	}
	ran := false
	err := dlock.Do(ctx, other.RLocker(), func(ctx context.Context) error {
		ran = true
		if other.Token() == 0 {
			return errors.New("no token inside Do under RLocker")
		}
		if err := rs[0].RUnlock(ctx); err != nil { // readers come and go meanwhile
			return err
		}
		return rs[0].RLock(ctx)
	})
	if err != nil || !ran {
		t.Fatalf("Do under RLocker: ran %v, %v", ran, err)
	}
	if other.Token() != 0 {
		t.Fatal("Do under RLocker left the read hold")
	}
	for _, rw := range rs[:2] {
		if err := rw.RUnlock(ctx); err != nil {
			t.Fatalf("RUnlock: %v", err)
		}
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock of a writer once every reader left: %v", err)
	}
	_ = other.Unlock(ctx)
}

// RWMutexExclusion: a writer holding excludes readers and writers (Try
// and blocking forms); then readers and writers of several Lockers
// contend, and no writer ever overlaps anyone, while readers do overlap
// each other.
func (s *suite) rwExclusion(t *testing.T) {
	ctx := ctxFor(t, 5*time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.longTTL()
	l1, l2 := s.locker(t), s.locker(t)
	w := mustRW(t, l1, key, 2, dlock.WithTTL(ttl))
	if err := w.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if w.Token() == 0 || w.Lease().Token != w.Token() {
		t.Fatalf("writer: Token %d, Lease %+v", w.Token(), w.Lease())
	}
	for name, l := range map[string]*dlock.Locker{"another Locker": l2, "the same Locker": l1} {
		o := mustRW(t, l, key, 2, dlock.WithTTL(ttl))
		if err := o.TryRLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryRLock through %s while a writer holds: %v; want ErrNotAcquired", name, err)
		}
		if err := o.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock through %s while a writer holds: %v; want ErrNotAcquired", name, err)
		}
		for op, lock := range map[string]func(context.Context) error{"RLock": o.RLock, "Lock": o.Lock} {
			// A loaded server may not answer within the first wait:
			// waitShort waits longer then.
			_, err := waitShort(false, lock)
			if !errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%s through %s while a writer holds, ctx ending: %v; want ErrNotAcquired and DeadlineExceeded", op, name, err)
			}
		}
	}
	if err := w.RUnlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("RUnlock of a write hold: %v; want ErrNotHeld", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	const (
		readers = 3
		workers = 6
		rounds  = 5
	)
	var (
		writing, reading, overlaps, maxReaders, shared atomic.Int32
		wg                                             sync.WaitGroup
		errs                                           = make(chan error, workers)
	)
	ls := []*dlock.Locker{l1, l2, s.locker(t)}
	for g := 0; g < workers; g++ {
		rw := mustRW(t, ls[g%len(ls)], key+"/mixed", readers, dlock.WithTTL(ttl))
		writer := g%3 == 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if writer {
					if err := rw.Lock(ctx); err != nil {
						errs <- fmt.Errorf("lock: %w", err)
						return
					}
					if writing.Add(1) != 1 || reading.Load() != 0 {
						overlaps.Add(1)
					}
					time.Sleep(5 * time.Millisecond)
					if reading.Load() != 0 {
						overlaps.Add(1)
					}
					writing.Add(-1)
					if err := rw.Unlock(ctx); err != nil {
						errs <- fmt.Errorf("unlock: %w", err)
						return
					}
					continue
				}
				if err := rw.RLock(ctx); err != nil {
					errs <- fmt.Errorf("rlock: %w", err)
					return
				}
				n := reading.Add(1)
				if writing.Load() != 0 {
					overlaps.Add(1)
				}
				if n > 1 {
					shared.Add(1)
				}
				for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				reading.Add(-1)
				if err := rw.RUnlock(ctx); err != nil {
					errs <- fmt.Errorf("runlock: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d times a writer overlapped a reader or a writer", n)
	}
	if n := maxReaders.Load(); n > readers {
		t.Fatalf("%d readers at once; at most %d allowed", n, readers)
	}
	t.Logf("readers shared the lock %d times, at most %d at once", shared.Load(), maxReaders.Load())
}

// RWMutexStarvation: readers keep arriving, always at least one holding; a
// writer that asks gets in, and every reader that began after the writer
// held the gate got in only after the writer's Unlock.
func (s *suite) rwStarvation(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.longTTL()
	const streams = 3
	var (
		stop      atomic.Bool
		writerIn  atomic.Bool
		writerOut atomic.Int64 // UnixNano of the writer's Unlock
		gated     atomic.Int64 // UnixNano the writer was seen holding the gate, or 0
		early     atomic.Int32 // readers begun after gated that got in before writerOut
		inDuring  atomic.Int32
		reads     atomic.Int32
		wg        sync.WaitGroup
		errs      = make(chan error, streams)
	)
	for g := 0; g < streams; g++ {
		rw := mustRW(t, s.locker(t), key, streams, dlock.WithTTL(ttl))
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(g) * 40 * time.Millisecond)
			for !stop.Load() {
				began := time.Now().UnixNano()
				if err := rw.RLock(ctx); err != nil {
					errs <- fmt.Errorf("rlock: %w", err)
					return
				}
				reads.Add(1)
				if writerIn.Load() {
					inDuring.Add(1)
				}
				if g := gated.Load(); g != 0 && began > g && writerOut.Load() == 0 {
					early.Add(1)
				}
				time.Sleep(120 * time.Millisecond)
				if err := rw.RUnlock(ctx); err != nil {
					errs <- fmt.Errorf("runlock: %w", err)
					return
				}
			}
		}()
	}
	defer func() {
		stop.Store(true)
		wg.Wait()
	}()
	// Let the stream run: from now on a reader always holds.
	time.Sleep(400 * time.Millisecond)
	w := mustRW(t, s.locker(t), key, streams, dlock.WithTTL(ttl), dlock.WithOwner("the writer"))
	insp := s.locker(t)
	got := make(chan error, 1)
	go func() {
		err := w.Lock(ctxFor(t, 30*time.Second))
		if err == nil {
			writerIn.Store(true)
		}
		got <- err
	}()
	// Mark when the writer holds the gate (it then waits for the readers).
	for gated.Load() == 0 {
		select {
		case err := <-got:
			got <- err
			gated.Store(time.Now().UnixNano())
			continue
		default:
		}
		info, err := insp.Inspect(ctx, w.GateKey())
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Held && info.Owner == "the writer" {
			gated.Store(time.Now().UnixNano())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-got; err != nil {
		t.Fatalf("writer's Lock under a stream of readers: %v (%d reads meanwhile)", err, reads.Load())
	}
	time.Sleep(150 * time.Millisecond)
	n := inDuring.Load()
	writerIn.Store(false)
	writerOut.Store(time.Now().UnixNano())
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d readers got in while the writer held", n)
	}
	if e := early.Load(); e != 0 {
		t.Fatalf("%d readers that began after the writer held the gate got in before the writer's Unlock", e)
	}
	t.Logf("the writer got in; %d reads in all", reads.Load())
}

// RWMutexOrder: with one reader slot held and a second reader holding the
// gate while it waits for the slot, a writer queues on the gate, then a
// third reader; the writer gets in before the third reader. On a backend
// whose server queues waiters (Harness.Queue) the four are of four
// Lockers, and each is seen queued (Inspect's Waiters) before the next
// comes; elsewhere they are of one Locker, whose own gate serves waiters
// in order (across processes such a backend gives no order: see
// docs/rwmutex.md), each a moment after the other.
func (s *suite) rwOrder(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.longTTL()
	insp := s.locker(t)
	shared := s.locker(t)
	lockerFor := func() *dlock.Locker {
		if s.h.Queue {
			return s.locker(t)
		}
		return shared
	}
	r1 := mustRW(t, lockerFor(), key, 1, dlock.WithTTL(ttl))
	if err := r1.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	waitWaiters := func(n int) {
		t.Helper()
		if !s.h.Queue {
			time.Sleep(300 * time.Millisecond)
			return
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			info, err := insp.Inspect(ctx, r1.GateKey())
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if info.Held && info.Waiters >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the gate: held %v with %d waiters; want held with %d", info.Held, info.Waiters, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	type res struct {
		who string
		err error
	}
	order := make(chan res, 3)
	r2 := mustRW(t, lockerFor(), key, 1, dlock.WithTTL(ttl))
	go func() { order <- res{"reader 2", r2.RLock(ctx)} }()
	// r2 holds the gate, waiting for the slot.
	waitWaiters(0)
	time.Sleep(100 * time.Millisecond)
	w := mustRW(t, lockerFor(), key, 1, dlock.WithTTL(ttl))
	go func() { order <- res{"writer", w.Lock(ctx)} }()
	waitWaiters(1)
	r3 := mustRW(t, lockerFor(), key, 1, dlock.WithTTL(ttl))
	go func() { order <- res{"reader 3", r3.RLock(ctx)} }()
	waitWaiters(2)
	if err := r1.RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	first := <-order
	if first.who != "reader 2" || first.err != nil {
		t.Fatalf("after reader 1 left: %s got in first (%v); want reader 2", first.who, first.err)
	}
	// The writer now holds the gate and waits for reader 2; reader 3 waits
	// behind it.
	time.Sleep(200 * time.Millisecond)
	if err := r2.RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	second := <-order
	if second.who != "writer" || second.err != nil {
		t.Fatalf("after reader 2 left: %s got in (%v); want the writer, queued before reader 3", second.who, second.err)
	}
	select {
	case r := <-order:
		t.Fatalf("%s got in while the writer holds (%v)", r.who, r.err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if third := <-order; third.who != "reader 3" || third.err != nil {
		t.Fatalf("after the writer: %s (%v); want reader 3", third.who, third.err)
	}
	_ = r3.RUnlock(ctx)
}

// RWMutexFencing: a writer's token is above every token issued before it,
// read or write; a reader's token is above every earlier writer's. A
// resource that keeps the highest writer token W and the highest reader
// token R (docs/rwmutex.md) refuses a writer overtaken by a reader and a
// reader overtaken by a writer, and no current holder.
func (s *suite) rwFencing(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.longTTL()
	l1, l2 := s.locker(t), s.locker(t)
	var (
		highest      dlock.Token // every token so far
		highestWrite dlock.Token
	)
	// The resource's two marks and its checks (fence.Rule).
	var markW, markR dlock.Token
	write := func(tok dlock.Token) error {
		if err := (fence.Rule{Resource: "r", Highest: max(markW, markR)}).Check(tok); err != nil {
			return err
		}
		markW = tok
		return nil
	}
	read := func(tok dlock.Token) error {
		if err := (fence.Rule{Resource: "r", Highest: markW}).Check(tok); err != nil {
			return err
		}
		markR = max(markR, tok)
		return nil
	}
	for round, l := range []*dlock.Locker{l1, l2, l1} {
		var rs []*dlock.RWMutex
		for i, rl := range []*dlock.Locker{l1, l2} {
			r := mustRW(t, rl, key, 2, dlock.WithTTL(ttl))
			if err := r.RLock(ctx); err != nil {
				t.Fatalf("RLock: %v", err)
			}
			if tok := r.Token(); tok <= highestWrite {
				t.Fatalf("round %d reader %d: token %d not above the last writer's %d", round, i, tok, highestWrite)
			}
			highest = max(highest, r.Token())
			rs = append(rs, r)
		}
		for i, r := range rs {
			if err := read(r.Token()); err != nil {
				t.Fatalf("round %d: reader %d refused by the resource: %v", round, i, err)
			}
			if err := r.RUnlock(ctx); err != nil {
				t.Fatalf("RUnlock: %v", err)
			}
		}
		w := mustRW(t, l, key, 2, dlock.WithTTL(ttl))
		if err := w.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if tok := w.Token(); tok <= highest {
			t.Fatalf("round %d writer: token %d not above every earlier token (%d)", round, tok, highest)
		}
		if err := write(w.Token()); err != nil {
			t.Fatalf("round %d: writer refused by the resource: %v", round, err)
		}
		highest, highestWrite = w.Token(), w.Token()
		if err := w.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	// A reader after the last writer, then a stale writer (an earlier
	// token) is refused; a stale reader too.
	r := mustRW(t, l2, key, 2, dlock.WithTTL(ttl))
	if err := r.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	if err := read(r.Token()); err != nil {
		t.Fatalf("reader refused: %v", err)
	}
	_ = r.RUnlock(ctx)
	if err := write(highestWrite); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("a writer overtaken by a reader: %v; want ErrStale", err)
	}
	if err := read(highestWrite - 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("a reader overtaken by a writer: %v; want ErrStale", err)
	}
}

// heldSlot returns the key of the held reader slot of rw (readers slots).
func heldSlot(t *testing.T, ctx context.Context, l *dlock.Locker, rw *dlock.RWMutex) string {
	t.Helper()
	for i := 0; i < rw.Readers(); i++ {
		k := fmt.Sprintf("%s#permit/%d", rw.ReadKey(), i)
		info, err := l.Inspect(ctx, k)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Held {
			return k
		}
	}
	t.Fatal("no reader slot held")
	return ""
}

// RWMutexLoss: a read hold and a write hold broken from outside close
// Done with Err matching ErrLockLost, before a lease could expire; the
// lock is then taken by others.
func (s *suite) rwLoss(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.ttl()
	l1, l2 := s.locker(t), s.locker(t)
	check := func(what string, rw *dlock.RWMutex, done <-chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(ttl + s.h.ExpiryGrace + slack):
			t.Fatalf("%s: Done still open after the hold was broken", what)
		}
		if err := rw.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("%s broken: Err %v; want ErrLockLost", what, err)
		}
		if rw.Token() != 0 {
			t.Fatalf("%s broken: Token %d; want 0", what, rw.Token())
		}
	}
	r := mustRW(t, l1, key, 1, dlock.WithTTL(ttl))
	if err := r.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	done := r.Done()
	if err := s.h.BreakLease(ctx, heldSlot(t, ctx, l2, r)); err != nil {
		t.Fatalf("BreakLease: %v", err)
	}
	check("a reader", r, done)
	w := mustRW(t, l2, key, 1, dlock.WithTTL(ttl))
	if err := w.Lock(ctx); err != nil {
		t.Fatalf("Lock after the reader's loss: %v", err)
	}
	done = w.Done()
	if err := s.h.BreakLease(ctx, w.GateKey()); err != nil {
		t.Fatalf("BreakLease: %v", err)
	}
	check("a writer", w, done)
	if err := r.RLock(ctx); err != nil {
		t.Fatalf("RLock after the writer's loss: %v", err)
	}
	_ = r.RUnlock(ctx)
	if err := w.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) && !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost write hold: %v", err)
	}
}

// RWMutexExpiry: a reader and a writer that stop renewing (a crashed
// holder) are passed once their leases run out, an expiry publishing
// nothing: a waiting writer wakes on the reader's remaining lease, a
// waiting reader on the writer's.
func (s *suite) rwExpiry(t *testing.T) {
	key := s.key(t, "rw")
	ttl := s.h.ttl()
	l1, l2 := s.locker(t), s.locker(t)
	ctx := ctxFor(t, 2*time.Minute)
	bound := ttl + s.h.ExpiryGrace + slack
	crashed := mustRW(t, l1, key, 2, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := crashed.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	w := mustRW(t, l2, key, 2, dlock.WithTTL(s.h.longTTL()))
	start := time.Now()
	if err := w.Lock(ctxFor(t, bound)); err != nil {
		t.Fatalf("Lock after a reader stopped renewing (TTL %v, grace %v): %v", ttl, s.h.ExpiryGrace, err)
	}
	t.Logf("a writer got in %v after a reader stopped renewing", time.Since(start))
	if !isClosed(crashed.Done()) || !errors.Is(crashed.Err(), dlock.ErrLockLost) {
		t.Fatalf("the crashed reader: Done closed %v, Err %v; want closed and ErrLockLost", isClosed(crashed.Done()), crashed.Err())
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	cw := mustRW(t, l1, key, 2, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := cw.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	r := mustRW(t, l2, key, 2, dlock.WithTTL(s.h.longTTL()))
	start = time.Now()
	if err := r.RLock(ctxFor(t, bound)); err != nil {
		t.Fatalf("RLock after a writer stopped renewing (TTL %v, grace %v): %v", ttl, s.h.ExpiryGrace, err)
	}
	t.Logf("a reader got in %v after a writer stopped renewing", time.Since(start))
	if r.Token() <= cw.Lease().Token || !errors.Is(cw.Err(), dlock.ErrLockLost) {
		t.Fatalf("the crashed writer: Err %v; reader's token %d", cw.Err(), r.Token())
	}
	_ = r.RUnlock(ctx)
}

// RWMutexClose: Close ends a writer's wait for readers and a reader's wait
// for a writer with ErrClosed, promptly; holds end with ErrClosed and
// their keys are free.
func (s *suite) rwClose(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	key := s.key(t, "rw")
	ttl := s.h.longTTL()
	lr, lw, lx, l4 := s.locker(t), s.locker(t), s.locker(t), s.locker(t)
	r := mustRW(t, lr, key, 2, dlock.WithTTL(ttl))
	if err := r.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	waitClosed := func(what string, res chan error) {
		t.Helper()
		select {
		case err := <-res:
			if !errors.Is(err, dlock.ErrClosed) {
				t.Fatalf("%s cut short by Close: %v; want ErrClosed", what, err)
			}
		case <-time.After(slack):
			t.Fatalf("%s still waiting after Close returned", what)
		}
	}
	// A writer waiting for the reader to leave.
	w := mustRW(t, lw, key, 2, dlock.WithTTL(ttl))
	res := make(chan error, 1)
	go func() { res <- w.Lock(ctx) }()
	time.Sleep(300 * time.Millisecond)
	if err := lw.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed("a writer's Lock", res)
	// A writer holding; a reader waiting for it.
	w2 := mustRW(t, l4, key, 2, dlock.WithTTL(ttl))
	if err := r.RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	if err := w2.Lock(ctx); err != nil {
		t.Fatalf("Lock after the closed writer: %v", err)
	}
	x := mustRW(t, lx, key, 2, dlock.WithTTL(ttl))
	go func() { res <- x.RLock(ctx) }()
	time.Sleep(300 * time.Millisecond)
	if err := lx.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	waitClosed("a reader's RLock", res)
	// Holds after Close of their Locker.
	done := w2.Done()
	if err := l4.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isClosed(done) || !errors.Is(w2.Err(), dlock.ErrClosed) {
		t.Fatalf("a write hold after Close: Done closed %v, Err %v; want closed and ErrClosed", isClosed(done), w2.Err())
	}
	if err := r.RLock(ctx); err != nil {
		t.Fatalf("RLock after the writer's Locker closed: %v", err)
	}
	slot := heldSlot(t, ctx, lr, r)
	done = r.Done()
	if err := lr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isClosed(done) || !errors.Is(r.Err(), dlock.ErrClosed) {
		t.Fatalf("a read hold after Close: Done closed %v, Err %v; want closed and ErrClosed", isClosed(done), r.Err())
	}
	l5 := s.locker(t)
	s.checkKeysFree(t, l5, "after Close of every holder's Locker", w2.GateKey(), slot)
	y := mustRW(t, l5, key, 2, dlock.WithTTL(ttl))
	if err := y.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after every Locker closed: %v", err)
	}
	_ = y.Unlock(ctx)
}

// RWMutexErrors: readers out of range, an empty key, and clients that
// disagree on the number of readers.
func (s *suite) rwErrors(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	key := s.key(t, "rw")
	l1, l2 := s.locker(t), s.locker(t)
	for _, n := range []int{0, -1, dlock.MaxPermits + 1} {
		if _, err := l1.NewRWMutex(key, n); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("NewRWMutex with %d readers: %v; want ErrInvalidOption", n, err)
		}
	}
	if _, err := l1.NewRWMutex("", 2); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewRWMutex with an empty key: %v; want ErrInvalidKey", err)
	}
	if _, err := l1.NewRWMutex(key, 2, dlock.WithTTL(-time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("NewRWMutex with a negative TTL: %v; want ErrInvalidOption", err)
	}
	ttl := s.h.longTTL()
	a := mustRW(t, l1, key, 2, dlock.WithTTL(ttl))
	if err := a.RLock(ctx); err != nil {
		t.Fatalf("RLock: %v", err)
	}
	b := mustRW(t, l2, key, 3, dlock.WithTTL(ttl))
	if err := b.RLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("RLock with 3 readers on a key of 2: %v; want ErrInvalidOption", err)
	}
	if err := b.TryLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("TryLock with 3 readers on a key of 2: %v; want ErrInvalidOption", err)
	}
	if b.Token() != 0 {
		t.Fatal("a refused client holds")
	}
	if err := a.RUnlock(ctx); err != nil {
		t.Fatalf("RUnlock: %v", err)
	}
	// The gate is free again: the refused client left nothing behind.
	c := mustRW(t, l2, key, 2, dlock.WithTTL(ttl))
	if err := c.TryLock(ctx); err != nil {
		t.Fatalf("TryLock after the refusals: %v", err)
	}
	_ = c.Unlock(ctx)
	if err := c.Renew(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Renew holding nothing: %v; want ErrNotHeld", err)
	}
}
