package consul

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Fairness between processes. A waiting Lock stands in the key's line
// (queue.go), which decides who goes next; what follows is for the
// attempts made outside a line (TryLock, a Lock's first attempt, every
// attempt with SessionPerHold). Consul has no queue for a KV lock: when the
// key is freed, every waiting process tries at once and the quickest wins.
// The releasing process is often quickest (its next local waiter starts
// the moment the release returns), so without help a remote waiter can
// lose race after race and starve, as api.Lock's waiters do.
//
// So, on a key that this driver has recently failed to take, an attempt is
// preceded by a random delay of up to maxJitter, halved for every attempt
// this driver has failed in a row: a process that has waited long goes
// almost at once, one that just held the key steps back a little, and
// waiters do not all hit the server at the same instant. If this driver's
// watch sees the key taken during the delay, the attempt is skipped (no
// write). A key nobody contends costs nothing: no delay is ever added to
// it. The delay is kept small: in our runs on a dev agent, a longer one
// lengthened handoffs without making them any fairer.
const (
	// maxJitter is the largest delay before an attempt on a contended key.
	maxJitter = time.Millisecond
	// contendedFor is how long after a failed attempt a key counts as
	// contended.
	contendedFor = 2 * time.Second
	// lockDelayFirstRetry is the first retry after an attempt refused by a
	// lock-delay; the retries back off exponentially up to the lock-delay.
	lockDelayFirstRetry = 10 * time.Millisecond
)

type fairness struct {
	mu   sync.Mutex
	keys map[string]*contention
}

type contention struct {
	fails     int       // attempts failed in a row
	lastFail  time.Time // the latest failed attempt
	heldSeen  time.Time // the latest time a watch saw the key held
	delayHits int       // attempts refused by a lock-delay in a row
	// heldIndex is the ModifyIndex of the lock this driver last saw on the
	// key (0: none), read at heldIndexAt; the next attempt is guarded by it.
	heldIndex   uint64
	heldIndexAt time.Time
	// lineAt is when a release last saw waiters in the key's line.
	lineAt time.Time
}

// errHeldSeen makes TryAcquire skip an attempt on a key its watch just saw
// taken.
var errHeldSeen = &driver.HeldError{}

// wait delays an attempt on a contended key.
func (f *fairness) wait(ctx context.Context, path string) error {
	f.mu.Lock()
	c := f.keys[path]
	var delay time.Duration
	if c != nil && time.Since(c.lastFail) < contendedFor {
		if bound := maxJitter >> min(c.fails, 10); bound > 0 {
			delay = rand.N(bound)
		}
	}
	f.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	start := time.Now()
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c := f.keys[path]; c != nil && c.heldSeen.After(start) {
		c.fails++
		c.lastFail = time.Now()
		return errHeldSeen
	}
	return nil
}

func (f *fairness) entry(path string) *contention {
	c := f.keys[path]
	if c == nil {
		if len(f.keys) >= 4096 {
			f.sweep()
		}
		c = &contention{}
		f.keys[path] = c
	}
	return c
}

// sweep forgets keys not contended lately. Called with f.mu held.
func (f *fairness) sweep() {
	now := time.Now()
	for k, c := range f.keys {
		if now.Sub(c.lastFail) > contendedFor && now.Sub(c.heldSeen) > contendedFor && now.Sub(c.lineAt) > contendedFor {
			delete(f.keys, k)
		}
	}
}

// failed records an attempt that found the key held.
func (f *fairness) failed(path string) {
	f.mu.Lock()
	c := f.entry(path)
	c.fails++
	c.lastFail = time.Now()
	f.mu.Unlock()
}

// acquired resets the key's failure streaks. The key stays contended for a
// while, so that the next local attempt gives way to remote waiters.
func (f *fairness) acquired(path string) {
	f.mu.Lock()
	if c := f.keys[path]; c != nil {
		c.fails = 0
		c.delayHits = 0
	}
	f.mu.Unlock()
}

// observed records what a watch saw.
func (f *fairness) observed(path string, held bool) {
	if !held {
		return
	}
	f.mu.Lock()
	if c := f.keys[path]; c != nil {
		c.heldSeen = time.Now()
	}
	f.mu.Unlock()
}

// lockDelayBackoff returns how long to wait before retrying a key that is
// free but was refused: a lock-delay is running, and its end is announced
// by nothing. The wait doubles from lockDelayFirstRetry up to the
// configured lock-delay (at least one second, as another process may use a
// longer one than this driver).
func (f *fairness) lockDelayBackoff(path string, lockDelay time.Duration) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.entry(path)
	d := lockDelayFirstRetry << min(c.delayHits, 20)
	c.delayHits++
	return min(d, max(lockDelay, time.Second))
}

// sawHeld records that the key was seen locked at index.
func (f *fairness) sawHeld(path string, index uint64) {
	f.mu.Lock()
	c := f.entry(path)
	c.heldIndex, c.heldIndexAt = index, time.Now()
	f.mu.Unlock()
}

// guardIndex returns the index at which the key was seen locked, if that
// was within contendedFor, and forgets it; 0 otherwise. An acquire that
// checks it in the same transaction takes the key only if nothing changed
// it since: if the holder's session ended meanwhile (which changes the
// key), the attempt fails, and the one after it is received once Consul
// has started that session's lock-delay. An old sighting is not used, as
// a key released since then costs the guarded attempt a second read.
func (f *fairness) guardIndex(path string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.keys[path]
	if c == nil || c.heldIndex == 0 {
		return 0
	}
	index := c.heldIndex
	c.heldIndex = 0
	if time.Since(c.heldIndexAt) >= contendedFor {
		return 0
	}
	return index
}

// sawLine records that a release saw waiters in the key's line.
func (f *fairness) sawLine(path string) {
	f.mu.Lock()
	f.entry(path).lineAt = time.Now()
	f.mu.Unlock()
}

// lineSeen reports whether a release saw waiters in the key's line within
// contendedFor: a Lock of the key then goes to the back of the line
// rather than take the key from the first in line.
func (f *fairness) lineSeen(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.keys[path]
	return c != nil && time.Since(c.lineAt) < contendedFor
}
