package move

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Acquirer = (*Driver)(nil)

// pollInterval is how often acquireOn retries when its watch broke.
const pollInterval = 100 * time.Millisecond

// acquireOn waits for req.Key on one store: in the store's own queue when
// it has one (so that a move's holders wait in line with the plain
// clients of that store, which a TryAcquire loop would not: a queue hands
// a release to its first waiter, and a line refuses every attempt made
// out of turn), else by watching and retrying. The hold's Since is set.
func acquireOn(ctx context.Context, d driver.Locker, req driver.Request) (driver.Hold, error) {
	if a, ok := d.(driver.Acquirer); ok {
		return a.Acquire(ctx, req)
	}
	w, err := watchFor(ctx, d, req.Key)
	if err != nil {
		return driver.Hold{}, err
	}
	defer func() { _ = w.Close() }()
	changed := w.Changed()
	for {
		sent := time.Now()
		h, err := d.TryAcquire(ctx, req)
		if err == nil {
			if h.Since.IsZero() {
				h.Since = sent
			}
			return h, nil
		}
		if !errors.Is(err, driver.ErrNotAcquired) {
			return driver.Hold{}, err
		}
		wait := time.Second
		var he *driver.HeldError
		if errors.As(err, &he) && he.Remaining > 0 {
			wait = min(wait, he.Remaining)
		}
		if changed == nil {
			wait = min(wait, pollInterval)
		}
		t := time.NewTimer(wait)
		select {
		case _, ok := <-changed:
			if !ok {
				changed = nil // the watch broke: poll
			}
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return driver.Hold{}, fmt.Errorf("%w: %w", driver.ErrNotAcquired, ctx.Err())
		}
		t.Stop()
	}
}

// watchFor opens the watch a waiting acquireOn uses: the store's line
// (driver.LockWatcher) when it has one, so that its attempts are those of
// a waiter in line and a release is handed to it in its turn, as to the
// plain clients of the store, else a plain watch. acquireOn keeps the
// line's rules: it attempts after every wake and after the remaining lease
// of a refusal, and closes the watch (which hands a wake on) when it stops.
func watchFor(ctx context.Context, d driver.Locker, key string) (driver.Watch, error) {
	if lw, ok := d.(driver.LockWatcher); ok {
		return lw.WatchLock(ctx, key)
	}
	return d.Watch(ctx, key)
}

// Acquire waits for req.Key on X, in X's queue beside C0's waiters, then
// on Y, in Y's queue beside C2's (the same order as TryAcquire). X's hold
// is renewed every third of its lease while Y is awaited; if it is lost
// meanwhile, both are given back and the wait starts over.
func (d *Driver) Acquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	req.Meta = Tag(req.Key, req.Meta, d.config())
	if d.from == nil {
		hy, err := acquireOn(ctx, d.to, req)
		if err != nil {
			return driver.Hold{}, err
		}
		return d.finish(ctx, req.Key, driver.Hold{}, time.Time{}, hy, hy.Since)
	}
	for {
		hx, err := acquireOn(ctx, d.from, req)
		if err != nil {
			return driver.Hold{}, err
		}
		k := keepX(ctx, d.from, hx)
		hy, err := acquireOn(k.ctx, d.to, req)
		hx, sinceX, lost := k.stop()
		if err == nil && !lost {
			return d.finish(ctx, req.Key, hx, sinceX, hy, hy.Since)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		if err == nil {
			_ = d.to.Release(rctx, hy)
		}
		d.releaseX(rctx, hx)
		cancel()
		if ctx.Err() != nil || !lost {
			return driver.Hold{}, err
		}
		req.Owner = freshOwner() // X's hold was lost while Y was awaited: start over
	}
}

// keeper renews a hold on X while its holder waits for Y, so that the
// hold never runs out unrenewed (a store may later hand its key back to
// the same owner, and an owner-checked renewal would then succeed on a
// hold that is not the one whose token the holder has).
type keeper struct {
	ctx    context.Context // ends when the hold on X is lost, or stop
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	h      driver.Hold
	since  time.Time
	lost   bool
}

func keepX(ctx context.Context, x driver.Locker, h driver.Hold) *keeper {
	k := &keeper{h: h, since: h.Since, done: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancel(ctx)
	go func() {
		defer close(k.done)
		t := time.NewTicker(max(h.TTL/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-k.ctx.Done():
				return
			case <-h.Lost:
				k.fail()
				return
			case <-t.C:
			}
			sent := time.Now()
			ttl, err := x.Renew(k.ctx, h)
			if k.ctx.Err() != nil {
				return // stopped: a renewal cut short leaves the last window
			}
			if err != nil || !time.Now().Before(k.validUntil()) {
				k.fail()
				return
			}
			k.mu.Lock()
			k.h.TTL, k.since = ttl, sent
			k.mu.Unlock()
		}
	}()
	return k
}

func (k *keeper) validUntil() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.since.Add(k.h.TTL - driver.DriftAllowance(k.h.TTL))
}

func (k *keeper) fail() {
	k.mu.Lock()
	k.lost = true
	k.mu.Unlock()
	k.cancel()
}

// stop ends the renewals and returns the hold, the start of its last
// window and whether it was lost (or its window ended) meanwhile.
func (k *keeper) stop() (driver.Hold, time.Time, bool) {
	k.cancel()
	<-k.done
	k.mu.Lock()
	defer k.mu.Unlock()
	lost := k.lost || !time.Now().Before(k.since.Add(k.h.TTL-driver.DriftAllowance(k.h.TTL)))
	return k.h, k.since, lost
}

// freshOwner is a new owner ID for another attempt of one Acquire: a
// store may remember an owner's grant or queue entry for a while after
// its release (a hand-off message in flight), which a new attempt under
// the same ID could take for its own.
func freshOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
