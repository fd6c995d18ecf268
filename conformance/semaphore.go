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

// The semaphore cases: at most N holders, each permit fenced and
// inspectable; waiters are served on release and on a crashed holder's
// expiry; clients that disagree on N get ErrInvalidOption; Close ends a
// wait promptly.

func mustSem(t testing.TB, l *dlock.Locker, key string, n int, opts ...dlock.Option) *dlock.Semaphore {
	t.Helper()
	sm, err := l.NewSemaphore(key, n, opts...)
	if err != nil {
		t.Fatalf("NewSemaphore(%q, %d): %v", key, n, err)
	}
	return sm
}

// Semaphore: two permits are held at once by two Lockers, a third
// TryAcquire fails, a waiting Acquire is served when a permit is released,
// every permit has its own key and token that Inspect reports; bad input
// is a typed error.
func (s *suite) semaphore(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	key := s.key(t, "sem")
	for _, n := range []int{0, -1, dlock.MaxPermits + 1} {
		if _, err := l1.NewSemaphore(key, n); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("NewSemaphore with %d permits: %v; want ErrInvalidOption", n, err)
		}
	}
	if _, err := l1.NewSemaphore("", 2); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewSemaphore with an empty key: %v; want ErrInvalidKey", err)
	}
	if _, err := l1.NewSemaphore(key, 2, dlock.WithTTL(-time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("NewSemaphore with a negative TTL: %v; want ErrInvalidOption", err)
	}
	ttl := s.h.longTTL()
	a, b, c := mustSem(t, l1, key, 2, dlock.WithTTL(ttl)), mustSem(t, l2, key, 2, dlock.WithTTL(ttl)), mustSem(t, l3, key, 2, dlock.WithTTL(ttl))
	if err := a.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Release before Acquire: %v; want ErrNotHeld", err)
	}
	if !isClosed(a.Done()) || a.Token() != 0 || a.Slot() != -1 || a.PermitKey() != "" || a.Err() != nil {
		t.Fatal("a Semaphore holding nothing: want Done closed, token 0, slot -1, no permit key, nil Err")
	}
	if err := a.Lock(ctx); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if err := a.Lock(ctx); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("second Acquire: %v; want ErrAlreadyHeld", err)
	}
	if err := b.TryLock(ctx); err != nil {
		t.Fatalf("TryAcquire of the second permit: %v", err)
	}
	if a.PermitKey() == b.PermitKey() || a.Slot() == b.Slot() {
		t.Fatalf("two holders share permit %q (slot %d)", a.PermitKey(), a.Slot())
	}
	for _, sm := range []*dlock.Semaphore{a, b} {
		if sm.Token() == 0 || !sm.Lease().Valid() || isClosed(sm.Done()) {
			t.Fatalf("permit %q: token %d, lease %+v; want a live permit with a token", sm.PermitKey(), sm.Token(), sm.Lease())
		}
		info, err := l3.Inspect(ctx, sm.PermitKey())
		if err != nil {
			t.Fatalf("Inspect %q: %v", sm.PermitKey(), err)
		}
		if !info.Held || info.Token != sm.Token() {
			t.Fatalf("Inspect %q: %+v; want held with token %d", sm.PermitKey(), info, sm.Token())
		}
	}
	if err := c.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a third permit of two: %v; want ErrNotAcquired", err)
	}
	_, err := waitShort(false, c.Lock)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Acquire with a short context, all permits held: %v; want DeadlineExceeded and ErrNotAcquired", err)
	}

	// A waiter is served when a permit is released, with a greater token
	// for that permit.
	res := make(chan error, 1)
	go func() { res <- c.Lock(ctx) }()
	time.Sleep(100 * time.Millisecond)
	freed, oldToken := a.PermitKey(), a.Token()
	done := a.Done()
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if !isClosed(done) || !errors.Is(a.Err(), dlock.ErrUnlocked) {
		t.Fatalf("after Release: Done closed %v, Err %v; want closed, ErrUnlocked", isClosed(done), a.Err())
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("Acquire waiting for a permit: %v", err)
		}
	case <-time.After(slack):
		t.Fatal("a waiting Acquire was not served after a permit was released")
	}
	if c.PermitKey() != freed || c.Token() <= oldToken {
		t.Fatalf("waiter got %q token %d; want the released %q with a token above %d", c.PermitKey(), c.Token(), freed, oldToken)
	}
	if err := a.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Release: %v; want ErrNotHeld", err)
	}
	_ = b.Unlock(ctx)
	_ = c.Unlock(ctx)
	s.checkKeysFree(t, l1, "after every permit was released", freed)
}

// SemaphoreBound: N+2 contenders over several Lockers, N permits: never
// more than N inside at once, every permit's operations accepted by a
// fence keyed by the permit (its tokens only go up), every round done.
func (s *suite) semaphoreBound(t *testing.T) {
	const (
		permits    = 2
		contenders = permits + 2
		rounds     = 6
	)
	key := s.key(t, "sem")
	ls := []*dlock.Locker{s.locker(t), s.locker(t)}
	var (
		inside  atomic.Int32
		most    atomic.Int32
		over    atomic.Int32
		fenced  fence.Memory
		wg      sync.WaitGroup
		errs    = make(chan error, contenders)
		ctx     = ctxFor(t, 5*time.Minute)
		longTTL = s.h.longTTL()
	)
	for g := 0; g < contenders; g++ {
		sm := mustSem(t, ls[g%len(ls)], key, permits, dlock.WithTTL(longTTL))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if err := sm.Lock(ctx); err != nil {
					errs <- fmt.Errorf("acquire: %w", err)
					return
				}
				n := inside.Add(1)
				if n > permits {
					over.Add(1)
				}
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				if err := fenced.Do(sm.PermitKey(), sm.Token(), func() error { time.Sleep(2 * time.Millisecond); return nil }); err != nil {
					errs <- fmt.Errorf("fence refused a live permit: %w", err)
				}
				inside.Add(-1)
				if err := sm.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("release: %w", err)
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
	if n := over.Load(); n != 0 {
		t.Fatalf("%d times more than %d holders at once (at most %d)", n, permits, most.Load())
	}
	t.Logf("at most %d holders at once", most.Load())
}

// SemaphoreExpiry: the permits of a holder that stops renewing (a crash)
// return after their lease: a waiter gets one, with a greater token for
// that permit, and the crashed holder's Done is closed.
func (s *suite) semaphoreExpiry(t *testing.T) {
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "sem")
	ttl := s.h.ttl()
	ctx := ctxFor(t, time.Minute)
	var crashed []*dlock.Semaphore
	tokens := map[string]dlock.Token{}
	for i := 0; i < 2; i++ {
		sm := mustSem(t, l1, key, 2, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
		if err := sm.Lock(ctx); err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		crashed = append(crashed, sm)
		tokens[sm.PermitKey()] = sm.Token()
	}
	waiter := mustSem(t, l2, key, 2, dlock.WithTTL(s.h.longTTL()))
	start := time.Now()
	if err := waiter.Lock(ctxFor(t, ttl+s.h.ExpiryGrace+slack)); err != nil {
		t.Fatalf("Acquire after the holders' TTL (%v, grace %v): %v", ttl, s.h.ExpiryGrace, err)
	}
	t.Logf("a permit returned %v after the holders stopped renewing", time.Since(start))
	old, ok := tokens[waiter.PermitKey()]
	if !ok {
		t.Fatalf("waiter holds %q, not one of the crashed holders' permits", waiter.PermitKey())
	}
	if waiter.Token() <= old {
		t.Fatalf("waiter's token %d not above the crashed holder's %d for %q", waiter.Token(), old, waiter.PermitKey())
	}
	for _, sm := range crashed {
		if sm.PermitKey() == waiter.PermitKey() {
			if !isClosed(sm.Done()) || !errors.Is(sm.Err(), dlock.ErrLockLost) {
				t.Fatalf("crashed holder of %q: Done closed %v, Err %v; want closed and ErrLockLost", sm.PermitKey(), isClosed(sm.Done()), sm.Err())
			}
		}
	}
	_ = waiter.Unlock(ctx)
}

// SemaphoreMismatch: clients that disagree on N get ErrInvalidOption and
// hold nothing afterwards, whichever came first, and when the other
// client's permit sits just past this client's N.
func (s *suite) semaphoreMismatch(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "sem")
	ttl := s.h.longTTL()
	two := mustSem(t, l1, key, 2, dlock.WithTTL(ttl))
	if err := two.Lock(ctx); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	three := mustSem(t, l2, key, 3, dlock.WithTTL(ttl))
	if err := three.TryLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("TryAcquire with 3 permits while a client with 2 holds one: %v; want ErrInvalidOption", err)
	}
	if err := three.Lock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("Acquire with 3 permits while a client with 2 holds one: %v; want ErrInvalidOption", err)
	}
	if three.Token() != 0 || three.Slot() != -1 {
		t.Fatalf("after the refusal the 3-permit client holds slot %d", three.Slot())
	}
	s.checkOnlyHeld(t, l1, key, 3, two.PermitKey())
	if err := two.Unlock(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The key is recorded with 2 permits; clear it for the second half.
	if ok, err := l1.ResetSemaphore(ctx, key, 2); err != nil || !ok {
		t.Fatalf("ResetSemaphore(2) with no permit held: %v, %v; want true", ok, err)
	}

	// The other way round, and with the larger client's permit in the
	// slot just past the smaller N: fill 3 slots, release all but slot 2.
	var big []*dlock.Semaphore
	for i := 0; i < 3; i++ {
		sm := mustSem(t, l2, key, 3, dlock.WithTTL(ttl))
		if err := sm.Lock(ctx); err != nil {
			t.Fatalf("Acquire %d of 3: %v", i+1, err)
		}
		big = append(big, sm)
	}
	for _, sm := range big {
		if sm.Slot() != 2 {
			if err := sm.Unlock(ctx); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
	}
	if err := two.Lock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("Acquire with 2 permits while a client with 3 holds slot 2: %v; want ErrInvalidOption", err)
	}
	if two.Slot() != -1 {
		t.Fatalf("after the refusal the 2-permit client holds slot %d", two.Slot())
	}
	s.checkOnlyHeld(t, l1, key, 3, key+"#permit/2")
	for _, sm := range big {
		_ = sm.Unlock(ctx)
	}
}

// SemaphoreRecord: the key's number of permits is recorded when first
// used, apart from its locks, and a client of another number is refused
// before it holds anything: even when the other client's only permit sits
// in a slot above this client's N, even when no permit is held, and of
// clients racing to be first, only one number wins. ResetSemaphore clears
// the record only for the number it holds and only while no permit is.
func (s *suite) semaphoreRecord(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	key := s.key(t, "semrec")
	ttl := s.h.longTTL()

	// A client with 4 permits holds only slot 3.
	var big []*dlock.Semaphore
	for i := 0; i < 4; i++ {
		sm := mustSem(t, l2, key, 4, dlock.WithTTL(ttl))
		if err := sm.Lock(ctx); err != nil {
			t.Fatalf("Acquire %d of 4: %v", i+1, err)
		}
		big = append(big, sm)
	}
	var kept *dlock.Semaphore
	for _, sm := range big {
		if sm.Slot() == 3 {
			kept = sm
			continue
		}
		if err := sm.Unlock(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
	small := mustSem(t, l1, key, 2, dlock.WithTTL(ttl))
	if err := small.TryLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("TryAcquire with 2 permits while a client with 4 holds slot 3: %v; want ErrInvalidOption", err)
	}
	if err := small.Lock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("Acquire with 2 permits while a client with 4 holds slot 3: %v; want ErrInvalidOption", err)
	}
	s.checkOnlyHeld(t, l1, key, 4, key+"#permit/3")
	if _, err := l1.ResetSemaphore(ctx, key, 4); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("ResetSemaphore while a permit is held: %v; want ErrNotAcquired", err)
	}
	if err := kept.Unlock(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}

	// No permit held: the record still says 4. A lock on the key itself,
	// and a Break of it, leave the record alone.
	m, err := l1.NewMutex(key, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock of the semaphore's own key: %v", err)
	}
	if _, err := l2.Break(ctx, key); err != nil {
		t.Fatalf("Break of the semaphore's own key: %v", err)
	}
	_ = m.Unlock(ctx)
	if info, err := l1.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect of the semaphore's key: %+v, %v; want free (the record is not a lock)", info, err)
	}
	if err := mustSem(t, l1, key, 2, dlock.WithTTL(ttl)).TryLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("TryAcquire with 2 permits on a key recorded with 4, none held: %v; want ErrInvalidOption", err)
	}
	if ok, err := l1.ResetSemaphore(ctx, key, 2); err != nil || ok {
		t.Fatalf("ResetSemaphore(2) on a key recorded with 4: %v, %v; want false and no error", ok, err)
	}
	if ok, err := l1.ResetSemaphore(ctx, key, 4); err != nil || !ok {
		t.Fatalf("ResetSemaphore(4): %v, %v; want true", ok, err)
	}
	if ok, err := l1.ResetSemaphore(ctx, key, 4); err != nil || ok {
		t.Fatalf("ResetSemaphore(4) again: %v, %v; want false", ok, err)
	}
	// Now 2 is the first number used, and 4 is refused.
	if err := small.Lock(ctx); err != nil {
		t.Fatalf("Acquire with 2 permits after the reset: %v", err)
	}
	if err := mustSem(t, l2, key, 4, dlock.WithTTL(ttl)).TryLock(ctx); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("TryAcquire with 4 permits on a key recorded with 2: %v; want ErrInvalidOption", err)
	}
	_ = small.Unlock(ctx)

	// Clients of two numbers racing to use a new key first: one number
	// wins, every client of the other is refused.
	l3 := s.locker(t)
	lockers := []*dlock.Locker{l1, l2, l3}
	for round := 0; round < 4; round++ {
		rkey := fmt.Sprintf("%s/race%d", key, round)
		const each = 3
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			refused = map[int]int{}
			in      = map[int]int{}
			sems    []*dlock.Semaphore
		)
		start := make(chan struct{})
		for i := 0; i < 2*each; i++ {
			n := 2 + i%2
			sm := mustSem(t, lockers[i%len(lockers)], rkey, n, dlock.WithTTL(ttl))
			sems = append(sems, sm)
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := sm.TryLock(ctx)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil, errors.Is(err, dlock.ErrNotAcquired):
					in[n]++
				case errors.Is(err, dlock.ErrInvalidOption):
					refused[n]++
				default:
					t.Errorf("TryAcquire with %d permits: %v", n, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, sm := range sems {
			_ = sm.Unlock(ctx)
		}
		if len(in) != 1 || len(refused) != 1 || in[2]+in[3] != each || refused[2]+refused[3] != each {
			t.Fatalf("round %d: accepted by number %v, refused by number %v; want every client of one number accepted and every one of the other refused", round, in, refused)
		}
	}
}

// checkOnlyHeld fails unless, of the first n permit slots of key, only
// the one named is held.
func (s *suite) checkOnlyHeld(t *testing.T, l *dlock.Locker, key string, n int, held string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("%s#permit/%d", key, i)
		info, err := l.Inspect(ctx, k)
		if err != nil {
			t.Fatalf("Inspect %q: %v", k, err)
		}
		if info.Held != (k == held) {
			t.Fatalf("Inspect %q: %+v; only %q should be held", k, info, held)
		}
	}
}

// SemaphoreClose: Close of the Locker ends an Acquire waiting for a
// permit promptly with ErrClosed, and ends a held permit (Done closed,
// Err ErrClosed, the permit free for others).
func (s *suite) semaphoreClose(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	key := s.key(t, "sem")
	ttl := s.h.longTTL()
	holder := mustSem(t, l2, key, 1, dlock.WithTTL(ttl))
	if err := holder.Lock(ctx); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	waiter := mustSem(t, l1, key, 1, dlock.WithTTL(ttl))
	res := make(chan error, 1)
	go func() { res <- waiter.Lock(ctx) }()
	time.Sleep(200 * time.Millisecond)
	if err := l1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Acquire cut short by Close: %v; want ErrClosed", err)
		}
	case <-time.After(slack):
		t.Fatal("Acquire still waiting after Close returned")
	}
	done := holder.Done()
	permit := holder.PermitKey()
	if err := l2.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isClosed(done) || !errors.Is(holder.Err(), dlock.ErrClosed) {
		t.Fatalf("a permit after Close: Done closed %v, Err %v; want closed and ErrClosed", isClosed(done), holder.Err())
	}
	s.checkKeysFree(t, l3, "after Close of the holder's Locker", permit)
	other := mustSem(t, l3, key, 1, dlock.WithTTL(ttl))
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryAcquire after the holder's Locker closed: %v", err)
	}
	_ = other.Unlock(ctx)
}
