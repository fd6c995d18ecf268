package consul

import (
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Consul checks a lock-delay when it receives an acquire, before the raft
// commit, and the commit only checks that the key is free. An acquire sent
// while the key is still held, and committed just after the holder's
// session is destroyed, would then take the key inside the lock-delay. A
// Locker that has seen the key held sends its next attempt guarded by the
// index it saw, so that such an attempt fails instead. Here Lockers try
// the key in tight loops while the holder's session is destroyed, round
// after round: no round may take the key before the lock-delay ends.
func TestLockDelayAgainstAnAttemptInFlight(t *testing.T) {
	const (
		delay    = 300 * time.Millisecond
		rounds   = 60
		spinners = 8
	)
	a := newAdmin(t, endpoint(t))
	holder := testLocker(t, "lockdelay="+delay.String())
	var lockers [spinners]*dlock.Locker
	for i := range lockers {
		lockers[i] = testLocker(t, "lockdelay=0s")
	}
	type result struct {
		m     *dlock.Mutex
		at    time.Time
		tries int
		err   error
	}
	for round := range rounds {
		key := testKey(t, "k"+time.Now().Format("150405.000000"))
		m1, _ := holder.NewMutex(key, dlock.WithTTL(MinTTL))
		if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
			t.Fatalf("round %d: Lock: %v", round, err)
		}
		stop := make(chan struct{})
		done := make(chan result, spinners)
		refused := make(chan struct{}, spinners)
		for _, l := range lockers {
			m, _ := l.NewMutex(key, dlock.WithTTL(MinTTL))
			go func() {
				r := result{m: m}
				for {
					r.tries++
					r.err = m.TryLock(ctxFor(t, 10*time.Second))
					if r.err == nil {
						r.at = time.Now()
						break
					}
					if !errors.Is(r.err, dlock.ErrNotAcquired) {
						break
					}
					if r.tries == 1 {
						refused <- struct{}{}
					}
					select {
					case <-stop:
						r.err = nil
						done <- r
						return
					default:
					}
				}
				done <- r
			}()
		}
		// Every spinner has now seen the key held, so its attempts are
		// guarded. A first attempt still in flight when the session ends
		// is the window the driver documents as left open (as with
		// Consul's own api.Lock): a loaded machine could start a spinner
		// late enough to fall into it.
		for range spinners {
			select {
			case <-refused:
			case r := <-done:
				t.Fatalf("round %d: TryLock on a held key: %v", round, r.err)
			}
		}
		start := time.Now()
		_, err := a.breakLease(ctxFor(t, 10*time.Second), key)
		first := <-done // the first to take the key, or fail
		close(stop)
		for range spinners - 1 {
			if r := <-done; r.err != nil {
				t.Errorf("round %d: TryLock: %v", round, r.err)
			}
		}
		if err != nil {
			t.Fatalf("round %d: destroying the session: %v", round, err)
		}
		if first.err != nil {
			t.Fatalf("round %d: TryLock: %v", round, first.err)
		}
		if waited := first.at.Sub(start); waited < delay {
			t.Fatalf("round %d: taken %v after the holder's session was destroyed, inside its %v lock-delay (%d tries)",
				round, waited, delay, first.tries)
		}
		if err := first.m.Unlock(ctxFor(t, 10*time.Second)); err != nil {
			t.Fatalf("round %d: Unlock: %v", round, err)
		}
	}
}

// A guarded attempt whose key changed since it was seen held takes the key
// if the change freed it (an Unlock starts no lock-delay), and is refused
// if someone else holds it again.
func TestGuardedAttemptAfterTheKeyChanged(t *testing.T) {
	l1, l2 := testLocker(t, "lockdelay=5s"), testLocker(t, "lockdelay=0s")
	key := testKey(t, "k")
	m1, _ := l1.NewMutex(key, dlock.WithTTL(MinTTL))
	m2, _ := l2.NewMutex(key, dlock.WithTTL(MinTTL))
	if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock on a held key: %v; want ErrNotAcquired", err)
	}
	// Held again by the same Locker, at a new index: still refused.
	if err := m1.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := m1.Lock(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock on a key held again: %v; want ErrNotAcquired", err)
	}
	// Released: taken at once, by the same call.
	if err := m1.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if err := m2.TryLock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("TryLock right after an Unlock, the key seen held before: %v", err)
	}
	if err := m2.Unlock(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
