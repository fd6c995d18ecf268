package faults

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/observe"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
)

// A many-holds run (RunOptions.Holds) has two workers. Worker 0 holds
// Holds keys on one Locker, half through Mutex.Lock and Done, half inside
// dlock.Do and the context it hands out, each with a TTL of its own
// (holdTTL), and reports for each when that Done closed and the validity
// deadline it last had. Worker 1, the taker, has a Locker of its own; told
// to (SIGUSR1), it takes over a sample of the keys (takenKeys), reads and
// writes each key's counter and releases. Told to after that (SIGUSR1),
// worker 0 writes each sampled key's counter with the token it held: the
// write of a holder that went on after its Done closed, which a fence must
// reject.

// takeovers is how many of the keys the taker takes over.
const takeovers = 16

// holdKey is the key of hold i under base.
func holdKey(base string, i int) string { return base + "/" + strconv.Itoa(i) }

// holdTTL is the TTL of hold i: base plus 0 to spread in 21 steps, so
// that the holds fall due for renewal, and are lost, at many instants.
func holdTTL(base, spread time.Duration, i int) time.Duration {
	return base + spread*time.Duration(i%21)/20
}

// takenKeys are the indices of the keys the taker takes over: spread
// over the keys, and so over their TTLs.
func takenKeys(n int) []int {
	stride := max(n/takeovers, 1)
	var out []int
	for i := 0; i < n && len(out) < takeovers; i += stride {
		out = append(out, i)
	}
	return out
}

// leaseWatch is an Observer of one Mutex that keeps the token and the
// validity deadline of its lease, as Lock and every renewal leave them. It
// reads no Mutex method: Lease and Done look at the clock and may declare
// the loss themselves, and the run must see when the watchdog does.
type leaseWatch struct {
	token   atomic.Uint64
	expires atomic.Int64 // CLOCK_MONOTONIC ns
}

func (w *leaseWatch) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (w *leaseWatch) Step(context.Context, observe.Call, observe.Step)          {}
func (w *leaseWatch) HoldEnd(observe.HoldEnd)                                   {}

func (w *leaseWatch) End(_ context.Context, c observe.Call, r observe.Result) {
	if r.Err != nil || r.Expires.IsZero() {
		return
	}
	switch c.Op {
	case observe.OpLock, observe.OpTryLock, observe.OpRenew:
		w.token.Store(r.Token)
		w.expires.Store(MonoAt(r.Expires))
	}
}

// manyHold is one of worker 0's holds.
type manyHold struct {
	key   string
	ttl   time.Duration
	watch leaseWatch
	read  int64 // the counter as read, for a sampled key
	at    int64 // when it was granted
}

// runManyHolds is a worker of a many-holds run. It never closes its
// Locker: on a cut-off link that would wait for releases that cannot
// arrive; the process just exits when told to stop.
func runManyHolds(ctx context.Context, c *workerClient) error {
	// The worker is never paused: keep-alive connections stay good.
	c.http.Transport = nil
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	locker, err := dlock.Open(ctx, c.cfg.URL)
	if err != nil {
		return err
	}
	c.event(Event{Kind: EvReady})
	if c.cfg.Taker {
		return takeOver(ctx, c, locker, usr1)
	}
	n := c.cfg.Holds
	hs := make([]*manyHold, n)
	lost := make(chan Event, n)
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range hs {
		h := &manyHold{key: holdKey(c.cfg.Key, i), ttl: holdTTL(c.cfg.TTL, c.cfg.Spread, i)}
		hs[i] = h
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := h.acquire(ctx, locker, i%2 == 1, lost); err != nil {
				err = fmt.Errorf("hold %s: %w", h.key, err)
				failed.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		c.event(Event{Kind: EvError, Err: (*err).Error()})
		return *err
	}
	for _, h := range hs {
		c.event(Event{Kind: EvAcquire, Key: h.key, Token: h.watch.token.Load(), Mono: h.at, Expires: h.watch.expires.Load(), TTL: int64(h.ttl)})
	}
	taken := takenKeys(n)
	for _, i := range taken {
		h := hs[i]
		r, err := c.opKey(EvRead, h.key, h.watch.token.Load(), 0, h.watch.expires.Load())
		if err != nil || r.Rejected {
			err := fmt.Errorf("read %s: %v (rejected %v)", h.key, err, r.Rejected)
			c.event(Event{Kind: EvError, Err: err.Error()})
			return err
		}
		h.read = r.Value
	}
	c.event(Event{Kind: EvHeld, Value: int64(n)})
	// The losses, reported after the acquisitions, in the order their
	// Done closed.
	go func() {
		for e := range lost {
			c.event(e)
		}
	}()
	select {
	case <-usr1:
	case <-ctx.Done():
		return nil
	}
	for _, i := range taken {
		h := hs[i]
		if _, err := c.opKey(EvWrite, h.key, h.watch.token.Load(), h.read+1, h.watch.expires.Load()); err != nil {
			c.event(Event{Kind: EvError, Key: h.key, Token: h.watch.token.Load(), Err: "stale write: " + err.Error()})
		}
	}
	<-ctx.Done()
	return nil
}

// acquire takes the hold, with Lock or inside Do, and starts waiting for
// its end: when Done (or Do's context) closes, it sends the loss to lost
// with that instant and the validity deadline the hold last had. Done is
// taken once, right after the hold is granted, so that nothing but the
// watchdog can declare the loss.
func (h *manyHold) acquire(ctx context.Context, l *dlock.Locker, do bool, lost chan<- Event) error {
	m, err := l.NewMutex(h.key, dlock.WithTTL(h.ttl), dlock.WithObserver(&h.watch))
	if err != nil {
		return err
	}
	report := func(done <-chan struct{}) {
		<-done
		at, expires := Mono(), h.watch.expires.Load()
		if ctx.Err() == nil { // not the end of the run
			lost <- Event{Kind: EvLost, Key: h.key, Token: h.watch.token.Load(), Mono: at, Expires: expires, TTL: int64(h.ttl)}
		}
	}
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// A store reached through a proxy, by a thousand Locks on a loaded
	// machine, may miss a call's deadline now and then (Redlock's
	// per-instance timeout is 100 ms): try again.
	for try := 0; ; try++ {
		err := h.try(ctx, lctx, m, do, report)
		if !errors.Is(err, dlock.ErrUnavailable) || try == 10 {
			return err
		}
		sleepCtx(lctx, 50*time.Millisecond)
	}
}

// try is one attempt of acquire.
func (h *manyHold) try(ctx, lctx context.Context, m *dlock.Mutex, do bool, report func(<-chan struct{})) error {
	if !do {
		if err := m.Lock(lctx); err != nil {
			return err
		}
		h.at = Mono()
		go report(m.Done())
		return nil
	}
	granted := make(chan error, 1)
	go func() {
		ran := false
		err := dlock.Do(ctx, m, func(hctx context.Context) error {
			ran = true
			h.at = Mono()
			done := hctx.Done()
			granted <- nil
			report(done)
			return nil
		})
		if !ran {
			granted <- err
		}
	}()
	select {
	case err := <-granted:
		return err
	case <-lctx.Done():
		return lctx.Err()
	}
}

// takeOver is the taker: once told to, it takes over every sampled key
// (each waits for the key's lease to end on the store), reads and writes
// its counter, and releases it.
func takeOver(ctx context.Context, c *workerClient, l *dlock.Locker, usr1 <-chan os.Signal) error {
	select {
	case <-usr1:
	case <-ctx.Done():
		return nil
	}
	var wg sync.WaitGroup
	for _, i := range takenKeys(c.cfg.Holds) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.takeOne(ctx, l, holdKey(c.cfg.Key, i), holdTTL(c.cfg.TTL, c.cfg.Spread, i))
		}()
	}
	wg.Wait()
	<-ctx.Done()
	return nil
}

func (c *workerClient) takeOne(ctx context.Context, l *dlock.Locker, key string, ttl time.Duration) {
	fail := func(token dlock.Token, what string, err error) {
		c.event(Event{Kind: EvError, Key: key, Token: uint64(token), Err: what + ": " + err.Error()})
	}
	m, err := l.NewMutex(key, dlock.WithTTL(ttl))
	if err != nil {
		fail(0, "mutex", err)
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		err := m.Lock(lctx)
		if err == nil {
			break
		}
		if !errors.Is(err, dlock.ErrUnavailable) || lctx.Err() != nil {
			fail(0, "lock", err)
			return
		}
		sleepCtx(lctx, 50*time.Millisecond) // as in acquire
	}
	lease := m.Lease()
	c.event(Event{Kind: EvAcquire, Key: key, Token: uint64(lease.Token), Expires: MonoAt(lease.Expires), TTL: int64(ttl)})
	r, err := c.opKey(EvRead, key, uint64(lease.Token), 0, MonoAt(lease.Expires))
	switch {
	case err != nil:
		fail(lease.Token, "read", err)
	case !r.Rejected:
		if _, err := c.opKey(EvWrite, key, uint64(lease.Token), r.Value+1, MonoAt(m.Lease().Expires)); err != nil {
			fail(lease.Token, "write", err)
		}
	}
	unlocking := Mono()
	if err := m.Unlock(lctx); err != nil {
		c.event(Event{Kind: EvError, Key: key, Token: uint64(lease.Token), Mono: unlocking, Err: "unlock: " + err.Error()})
		return
	}
	c.event(Event{Kind: EvRelease, Key: key, Token: uint64(lease.Token), Mono: unlocking})
}

// opKey reads or writes the counter of key through the resource.
func (c *workerClient) opKey(kind, key string, token uint64, value, expires int64) (opReply, error) {
	var reply opReply
	err := c.post("/op", opRequest{Worker: c.cfg.ID, Kind: kind, Key: key, Token: token, Value: value, Expires: expires}, &reply)
	return reply, err
}
