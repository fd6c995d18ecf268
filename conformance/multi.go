package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// The multi-key lock cases: a set is locked all or nothing, overlapping
// sets taken in different orders neither deadlock nor overlap, a lost key
// ends the set, and Close ends a wait and a hold without leaving a key
// behind.

func mustMulti(t testing.TB, l *dlock.Locker, keys []string, opts ...dlock.Option) *dlock.MultiMutex {
	t.Helper()
	mm, err := l.NewMultiMutex(keys, opts...)
	if err != nil {
		t.Fatalf("NewMultiMutex(%q): %v", keys, err)
	}
	return mm
}

// checkKeysFree fails unless Inspect shows every key free.
func (s *suite) checkKeysFree(t *testing.T, l *dlock.Locker, what string, keys ...string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	for _, k := range keys {
		info, err := l.Inspect(ctx, k)
		if err != nil {
			t.Fatalf("Inspect %q %s: %v", k, what, err)
		}
		if info.Held {
			t.Fatalf("Inspect %q %s: %+v; want free (no partial hold left behind)", k, what, info)
		}
	}
}

// waitKeysFree waits (bounded) until Inspect shows every key free.
func (s *suite) waitKeysFree(t *testing.T, l *dlock.Locker, what string, keys ...string) {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	deadline := time.Now().Add(slack)
	for _, k := range keys {
		for {
			info, err := l.Inspect(ctx, k)
			if err != nil {
				t.Fatalf("Inspect %q %s: %v", k, what, err)
			}
			if !info.Held {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Inspect %q %s: %+v; want free", k, what, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// MultiLock: the set is deduplicated and sorted; Lock takes every key with
// its own token; another set that overlaps cannot be taken and leaves its
// other keys free; Unlock frees all; bad input is a typed error.
func (s *suite) multiLock(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	a, b, c, d := s.key(t, "a"), s.key(t, "b"), s.key(t, "c"), s.key(t, "d")

	if _, err := l1.NewMultiMutex(nil); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewMultiMutex with no keys: %v; want ErrInvalidKey", err)
	}
	if _, err := l1.NewMultiMutex([]string{a, ""}); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewMultiMutex with an empty key: %v; want ErrInvalidKey", err)
	}
	if _, err := l1.NewMultiMutex([]string{a}, dlock.WithTTL(-time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("NewMultiMutex with a negative TTL: %v; want ErrInvalidOption", err)
	}

	ttl := s.h.longTTL()
	mm := mustMulti(t, l1, []string{c, a, b, a}, dlock.WithTTL(ttl))
	if got, want := mm.Keys(), []string{a, b, c}; !slices.Equal(got, want) {
		t.Fatalf("Keys() = %q; want %q (sorted, without duplicates)", got, want)
	}
	if !isClosed(mm.Done()) || mm.Tokens() != nil || mm.Lease() != (dlock.Lease{}) || mm.Err() != nil {
		t.Fatal("a MultiMutex that never locked: want Done closed, no tokens, zero Lease, nil Err")
	}
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock before Lock: %v; want ErrNotHeld", err)
	}
	before := time.Now()
	if err := mm.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if s.h.SessionLease {
		before = time.Now() // the lease may run from a later session request
	}
	if err := mm.Lock(ctx); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("second Lock: %v; want ErrAlreadyHeld", err)
	}
	toks := mm.Tokens()
	if len(toks) != 3 {
		t.Fatalf("Tokens() = %v; want one per key", toks)
	}
	for _, k := range mm.Keys() {
		info, err := l2.Inspect(ctx, k)
		if err != nil {
			t.Fatalf("Inspect %q: %v", k, err)
		}
		if !info.Held || info.Token != toks[k] || toks[k] == 0 {
			t.Fatalf("Inspect %q: %+v; want held with the set's token %d", k, info, toks[k])
		}
	}
	lease := mm.Lease()
	if !lease.Valid() || lease.Expires.After(before.Add(ttl)) {
		t.Fatalf("Lease() = %+v; want valid, expiring by %v", lease, before.Add(ttl))
	}
	if isClosed(mm.Done()) || mm.Err() != nil {
		t.Fatalf("held set: Done closed or Err %v", mm.Err())
	}

	// An overlapping set of another Locker: TryLock fails on the shared
	// key and leaves the other key free.
	other := mustMulti(t, l2, []string{d, b}, dlock.WithTTL(ttl))
	if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of an overlapping set: %v; want ErrNotAcquired", err)
	}
	s.checkKeysFree(t, l1, "after a failed TryLock of an overlapping set", d)
	// The same within one Locker.
	same := mustMulti(t, l1, []string{b, d}, dlock.WithTTL(ttl))
	if err := same.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of an overlapping set of the same Locker: %v; want ErrNotAcquired", err)
	}
	s.checkKeysFree(t, l2, "after a failed TryLock of an overlapping set of the same Locker", d)

	done := mm.Done()
	if err := mm.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if !isClosed(done) || !errors.Is(mm.Err(), dlock.ErrUnlocked) {
		t.Fatalf("after Unlock: Done closed %v, Err %v; want closed and ErrUnlocked", isClosed(done), mm.Err())
	}
	s.checkKeysFree(t, l2, "after Unlock", a, b, c)
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v; want ErrNotHeld", err)
	}
	if err := other.TryLock(ctx); err != nil {
		t.Fatalf("TryLock of the other set after Unlock: %v", err)
	}
	if err := other.Unlock(ctx); err != nil {
		t.Fatalf("Unlock of the other set: %v", err)
	}
	if err := mm.Lock(ctx); err != nil {
		t.Fatalf("Lock again: %v", err)
	}
	// Tokens go up per key for every new holder.
	if got := mm.Tokens(); got[a] <= toks[a] {
		t.Fatalf("token of %q: %d after %d; want greater", a, got[a], toks[a])
	}
	_ = mm.Unlock(ctx)
}

// MultiPartial: a set with one key held elsewhere leaves none of its other
// keys held: TryLock fails, Lock with a short context ends with
// ErrNotAcquired and the context's error, and Inspect shows the others
// free each time. The held key is first, in the middle and last in the
// locking order.
func (s *suite) multiPartial(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	keys := []string{s.key(t, "1"), s.key(t, "2"), s.key(t, "3")}
	for i, held := range keys {
		blocker := mustMutex(t, l1, held, dlock.WithTTL(s.h.longTTL()))
		if err := blocker.Lock(ctx); err != nil {
			t.Fatalf("Lock %q: %v", held, err)
		}
		others := slices.Delete(slices.Clone(keys), i, i+1)
		mm := mustMulti(t, l2, keys)
		if err := mm.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock with %q held elsewhere: %v; want ErrNotAcquired", held, err)
		}
		s.checkKeysFree(t, l3, fmt.Sprintf("after TryLock failed on %q", held), others...)
		if mm.Tokens() != nil || !isClosed(mm.Done()) {
			t.Fatalf("after a failed TryLock: Tokens %v, Done closed %v; want none and closed", mm.Tokens(), isClosed(mm.Done()))
		}
		_, err := waitShort(false, mm.Lock)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("Lock with a short context, %q held elsewhere: %v; want DeadlineExceeded and ErrNotAcquired", held, err)
		}
		s.checkKeysFree(t, l3, fmt.Sprintf("after Lock timed out on %q", held), others...)
		if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Unlock after a failed Lock: %v; want ErrNotHeld", err)
		}
		if err := blocker.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %q: %v", held, err)
		}
	}
}

// MultiOverlap: goroutines of several Lockers lock overlapping sets of a
// few keys, each given in a random order: every round completes (no
// deadlock: the context bounds a hang) and no key ever has two holders.
func (s *suite) multiOverlap(t *testing.T) {
	const (
		lockers    = 3
		goroutines = 6
		rounds     = 6
		pool       = 4
	)
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		ls[i] = s.locker(t)
	}
	keys := make([]string, pool)
	for i := range keys {
		keys[i] = s.key(t, fmt.Sprint(i))
	}
	var (
		inside   [pool]atomic.Int32
		counter  [pool]atomic.Int64
		want     [pool]atomic.Int64
		overlaps atomic.Int32
		wg       sync.WaitGroup
		errs     = make(chan error, goroutines)
	)
	ctx := ctxFor(t, 5*time.Minute)
	for g := 0; g < goroutines; g++ {
		// Sets of two or three neighbouring keys (wrapping), reversed for
		// every other goroutine: the orders given differ, the sets overlap.
		size := 2 + g%2
		var set []int
		for j := 0; j < size; j++ {
			set = append(set, (g+j)%pool)
		}
		if g%2 == 1 {
			slices.Reverse(set)
		}
		names := make([]string, len(set))
		for j, k := range set {
			names[j] = keys[k]
		}
		rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		mm := mustMulti(t, ls[g%lockers], names, dlock.WithTTL(s.h.longTTL()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				if err := mm.Lock(ctx); err != nil {
					errs <- fmt.Errorf("lock %v: %w", set, err)
					return
				}
				for _, k := range set {
					if inside[k].Add(1) != 1 {
						overlaps.Add(1)
					}
				}
				vals := make([]int64, len(set))
				for j, k := range set {
					vals[j] = counter[k].Load()
				}
				time.Sleep(time.Millisecond)
				for j, k := range set {
					counter[k].Store(vals[j] + 1)
					want[k].Add(1)
					inside[k].Add(-1)
				}
				if err := mm.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("unlock %v: %w", set, err)
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
		t.Fatalf("%d overlapping holds of a key", n)
	}
	for k := range keys {
		if got, w := counter[k].Load(), want[k].Load(); got != w {
			t.Fatalf("key %d: counter %d; want %d (lost updates)", k, got, w)
		}
	}
	s.checkKeysFree(t, ls[0], "after every set was unlocked", keys...)
}

// MultiLoss: when one key's hold is broken from outside, the set's Done
// closes, Err and Unlock match ErrLockLost, and the other keys are
// released.
func (s *suite) multiLoss(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	keys := []string{s.key(t, "a"), s.key(t, "b"), s.key(t, "c")}
	ttl := s.h.ttl()
	mm := mustMulti(t, l1, keys, dlock.WithTTL(ttl))
	if err := mm.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := s.h.BreakLease(ctx, keys[1]); err != nil {
		t.Fatalf("BreakLease: %v", err)
	}
	select {
	case <-mm.Done():
	case <-time.After(ttl + s.h.ExpiryGrace + slack):
		t.Fatal("the set's Done stayed open after one key's lease was broken")
	}
	if err := mm.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err after a key was lost: %v; want ErrLockLost", err)
	}
	if mm.Tokens() != nil || mm.Lease().Valid() {
		t.Fatal("a lost set still reports tokens or a valid lease")
	}
	s.waitKeysFree(t, l2, "after one key of the set was lost", keys[0], keys[2])
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) || errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock after a key was lost: %v; want ErrLockLost (not ErrNotHeld)", err)
	}
	// The set can be locked again.
	if err := mm.Lock(ctx); err != nil {
		t.Fatalf("Lock after the loss: %v", err)
	}
	_ = mm.Unlock(ctx)
}

// MultiClose: Close of the Locker ends a Lock waiting on a key held
// elsewhere promptly with ErrClosed, leaving the keys it had taken free,
// and ends a held set (Done closed, Err ErrClosed, every key free).
func (s *suite) multiClose(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	keys := []string{s.key(t, "a"), s.key(t, "b")}
	blocker := mustMutex(t, l3, keys[1], dlock.WithTTL(s.h.longTTL()))
	if err := blocker.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	waiter := mustMulti(t, l1, keys, dlock.WithTTL(s.h.longTTL()))
	res := make(chan error, 1)
	go func() { res <- waiter.Lock(ctx) }()
	// Wait until the waiter holds the first key: it then waits on the second.
	deadline := time.Now().Add(slack)
	for {
		info, err := l2.Inspect(ctx, keys[0])
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiting set never took its first key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Lock cut short by Close: %v; want ErrClosed", err)
		}
	case <-time.After(slack):
		t.Fatal("Lock still waiting after Close returned")
	}
	s.checkKeysFree(t, l2, "after Close cut a waiting set short", keys[0])
	_ = blocker.Unlock(ctx)

	l4 := s.locker(t)
	held := mustMulti(t, l4, keys, dlock.WithTTL(s.h.longTTL()))
	if err := held.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	done := held.Done()
	if err := l4.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-done:
	case <-time.After(slack):
		t.Fatal("a held set's Done stayed open after Close")
	}
	if err := held.Err(); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Err after Close: %v; want ErrClosed", err)
	}
	s.checkKeysFree(t, l2, "after Close of a Locker holding a set", keys...)
}

// probeMulti tries to take keys, each alone and then all as a set, from
// another Locker until the instant until (the holder's Lease().Expires),
// and fails if an attempt returned holding its lock before until: the
// holder's validity window was still open. A success at or after until
// ends the probe (the lock is given back).
func (s *suite) probeMulti(t *testing.T, l *dlock.Locker, until time.Time, what string, keys ...string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	set := mustMulti(t, l, keys, dlock.WithTTL(s.h.longTTL()))
	ms := make([]*dlock.Mutex, len(keys))
	for i, k := range keys {
		ms[i] = mustMutex(t, l, k, dlock.WithTTL(s.h.longTTL()))
	}
	for round := 0; time.Now().Before(until); round++ {
		for i, m := range ms {
			err := m.TryLock(ctx)
			if err == nil {
				at := time.Now()
				_ = m.Unlock(ctx)
				if at.Before(until) {
					t.Fatalf("%s: key %q taken by another Locker %v before the holder's Lease().Expires (round %d)", what, keys[i], until.Sub(at), round)
				}
				return
			}
			if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("%s: TryLock %q: %v", what, keys[i], err)
			}
		}
		err := set.TryLock(ctx)
		if err == nil {
			at := time.Now()
			_ = set.Unlock(ctx)
			if at.Before(until) {
				t.Fatalf("%s: the set taken by another Locker %v before the holder's Lease().Expires (round %d)", what, until.Sub(at), round)
			}
			return
		}
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s: TryLock of the set: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// MultiLossWindow: a set whose hold is lost keeps the validity window a
// Mutex keeps. With auto-renew off, Done closes at the loss margin (a
// tenth of the TTL before Lease().Expires), and until Expires has passed,
// on this process's clock, no other Locker takes a key of the set, lost
// or not, nor the whole set; afterwards every key can be taken. The same
// when one key is broken from outside (Locker.Break): the keys still held
// stay held until the set's Lease().Expires, as last reported, has passed.
func (s *suite) multiLossWindow(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	l1, l2 := s.locker(t), s.locker(t)
	keys := []string{s.key(t, "a"), s.key(t, "b"), s.key(t, "c")}
	ttl := s.h.ttl()
	mm := mustMulti(t, l1, keys, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := mm.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	lease := mm.Lease()
	if !lease.Valid() {
		t.Fatalf("Lease() = %+v right after Lock; want valid", lease)
	}
	select {
	case <-mm.Done():
	case <-time.After(ttl + slack):
		t.Fatal("the set's Done stayed open after its lease ran out")
	}
	if err := mm.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err after the lease ran out: %v; want ErrLockLost", err)
	}
	if mm.Lease().Valid() || mm.Tokens() != nil {
		t.Fatal("a lost set still reports a valid lease or tokens")
	}
	s.probeMulti(t, l2, lease.Expires, "lease ran out (auto-renew off)", keys...)
	// Every key comes back once the window has passed (on the server's
	// expiry, or released by the set).
	next := mustMulti(t, l2, keys, dlock.WithTTL(s.h.longTTL()))
	if err := next.Lock(ctxFor(t, ttl+s.h.ExpiryGrace+slack)); err != nil {
		t.Fatalf("Lock of the set after the lost holder's window: %v", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := mm.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) || errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock after the loss: %v; want ErrLockLost (not ErrNotHeld)", err)
	}

	// One key broken from outside while the set is held and renewed
	// (Locker.Break: that key's hold only, where the harness's BreakLease
	// may end a lease or session the other keys share).
	held := mustMulti(t, l1, keys, dlock.WithTTL(ttl))
	if err := held.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	lease = held.Lease()
	if info, err := l2.Break(ctx, keys[1]); err != nil || !info.Held {
		t.Fatalf("Break: %+v, %v; want the set's hold of %q", info, err, keys[1])
	}
	s.probeMulti(t, l2, lease.Expires, "one key broken", keys[0], keys[2])
	select {
	case <-held.Done():
	case <-time.After(ttl + s.h.ExpiryGrace + slack):
		t.Fatal("the set's Done stayed open after one key's lease was broken")
	}
	s.waitKeysFree(t, l2, "after the broken set's window", keys[0], keys[2])
	if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after a key was broken: %v; want ErrLockLost", err)
	}
}
