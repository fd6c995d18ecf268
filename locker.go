package dlock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// closeReleaseTimeout bounds how long Close spends releasing held locks.
const closeReleaseTimeout = 5 * time.Second

// releaseGrace is how long a release goes on after its caller's context
// has ended (see releaseContext).
const releaseGrace = 5 * time.Second

// releaseContext is the context a release (the Unlock of every lock) runs
// on: ctx's values, not its end. A caller whose context ends, or has
// already ended, while it gives a lock back (an HTTP handler whose client
// went away, with a deferred Unlock) would otherwise leave the key held on
// the server for a whole lease, with nothing left to retry the release
// with. The release has releaseGrace more once ctx has ended. cancel must
// be called when the release returns.
func releaseContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		// ctx never ends (context.Background, WithoutCancel): it is its own
		// release context, and there is nothing to undo.
		return ctx, noCancel
	}
	if ctx.Err() != nil {
		return context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(releaseGrace, cancel) })
	return rctx, func() { stop(); cancel() }
}

// noCancel is the cancel of a context that needs none.
func noCancel() {}

// Locker is one connected backend. Make one per process (it holds the
// connections) and any number of Mutexes from it.
type Locker struct {
	// Close and the calls in flight meet under mu: every Mutex call registers
	// itself (enter) and deregisters (exit) under mu, Close marks the Locker
	// closed under mu and then waits, still under mu (a sync.Cond), until no
	// call is in flight. So a call either starts before Close and is waited
	// for, or sees the Locker closed and does nothing; a hold is tracked (and
	// set on its Mutex) under mu too, so Close sees every hold that any call
	// has returned, and a grant that arrives after Close began is given back by
	// the call that received it.
	drv      driver.Locker
	acq      driver.Acquirer // nil unless the driver queues on the server
	lim      driver.Limits
	defaults options

	// life ends when Close begins: it cancels the acquires and renewals
	// in flight. grace ends closeReleaseTimeout later (or when Close
	// returns): it bounds the Unlocks in flight, which Close waits for.
	// Both end with the cause ErrClosed.
	life, grace       context.Context
	endLife, endGrace context.CancelCauseFunc
	// The contexts of calls made with context.Background(): life's and
	// grace's ends with no values, made once (see closingCtx).
	lifeBg, graceBg context.Context
	closed          <-chan struct{} // life.Done()
	gates           gates
	sched           *scheduler          // the renewal watchdog of every hold
	lossN           driver.LossNotifier // nil unless the driver calls back on loss
	lapser          driver.Lapser       // nil unless the driver can let a hold lapse (WithMinHold)
	ownerChecked    bool                // the driver's renewals change only their own holds (driver.OwnerCheckedRenewer)
	wg              sync.WaitGroup      // scheduler and Lost watcher goroutines

	mu       sync.Mutex
	idle     sync.Cond // signalled when calls drops to 0 after Close began
	isClosed bool
	calls    int // Mutex calls in flight
	holds    map[*hold]struct{}
}

// NewLocker wraps a driver in the portable Locker. Backend packages call it
// from their constructors; programs normally use Open or a backend's New.
// The options set the defaults of every Mutex made from the Locker.
func NewLocker(d driver.Locker, opts ...Option) (*Locker, error) {
	if d == nil {
		return nil, errors.New("dlock: NewLocker with a nil driver")
	}
	l := &Locker{
		drv:      d,
		defaults: defaultOptions(),
		gates:    gates{m: map[string]*gate{}},
		holds:    map[*hold]struct{}{},
	}
	l.idle.L = &l.mu
	l.life, l.endLife = context.WithCancelCause(context.Background())
	l.grace, l.endGrace = context.WithCancelCause(context.Background())
	l.closed = l.life.Done()
	l.lifeBg = &closingCtx{Context: context.Background(), end: l.life}
	l.graceBg = &closingCtx{Context: context.Background(), end: l.grace}
	for _, o := range opts {
		o(&l.defaults)
	}
	if !l.defaults.metaSet {
		l.defaults.meta = defaultOwner()
	}
	if l.defaults.backend == "" {
		l.defaults.backend = backendName(d)
	}
	if a, ok := d.(driver.Acquirer); ok {
		l.acq = a
	}
	if ln, ok := d.(driver.LossNotifier); ok {
		l.lossN = ln
	}
	if lp, ok := d.(driver.Lapser); ok {
		l.lapser = lp
	}
	if oc, ok := d.(driver.OwnerCheckedRenewer); ok {
		l.ownerChecked = oc.OwnerCheckedRenewals()
	}
	l.sched = newScheduler(l)
	if lm, ok := d.(driver.Limiter); ok {
		l.lim = lm.Limits()
	}
	l.defaults = l.defaults.withinLimits(l.lim)
	if err := l.defaults.validate(l.lim); err != nil {
		return nil, err
	}
	if err := l.defaults.validateHolds(l.lapser != nil); err != nil {
		return nil, err
	}
	return l, nil
}

// NewMutex returns a Mutex for key. Options override the Locker's
// defaults. An empty or over-long key is an ErrInvalidKey error; an
// unusable TTL is an ErrInvalidOption error.
func (l *Locker) NewMutex(key string, opts ...Option) (*Mutex, error) {
	if err := l.checkOpen(); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	o := l.defaults
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(l.lim); err != nil {
		return nil, err
	}
	if err := o.validateHolds(l.lapser != nil); err != nil {
		return nil, err
	}
	return &Mutex{l: l, key: key, opts: o, obs: o.observer()}, nil
}

func (l *Locker) checkOpen() error {
	if l == nil {
		return fmt.Errorf("%w: a nil *Locker", ErrInvalidOption)
	}
	select {
	case <-l.closed:
		return ErrClosed
	default:
		return nil
	}
}

// enter registers a Mutex call in flight. It fails with ErrClosed once
// Close has begun. The context it returns is ctx, also cancelled (cause
// ErrClosed) when Close begins, or for an Unlock (release) when Close's
// grace for releases ends; exit.done must be called when the call returns.
//
// Everything that can panic (a nil ctx) runs before the call is counted, so
// that a recovered panic never leaves Close waiting for a call that is gone.
func (l *Locker) enter(ctx context.Context, release bool) (context.Context, callExit, error) {
	end, bg := l.life, l.lifeBg
	if release {
		end, bg = l.grace, l.graceBg
	}
	var (
		cctx   context.Context
		stop   func() bool
		cancel context.CancelCauseFunc
	)
	switch {
	case ctx == context.Background():
		cctx = bg // the same, made once
	case ctx.Done() == nil:
		// ctx never ends: the call ends with the Locker alone, and needs
		// no context of its own to cancel nor a callback on end.
		cctx = &closingCtx{Context: ctx, end: end}
	default:
		cctx, cancel = context.WithCancelCause(ctx)
		stop = context.AfterFunc(end, func() { cancel(ErrClosed) })
	}
	return l.register(cctx, callExit{l: l, stop: stop, cancel: cancel})
}

// enterRelease is releaseContext and enter(ctx, true) in one: the call's
// context has ctx's values, and ends releaseGrace after ctx ends, or when
// the grace for releases ends, whichever comes first. It derives one
// context, under grace (so that grace's end reaches it without a
// callback), where the two steps derived two, each watching its parent.
func (l *Locker) enterRelease(ctx context.Context) (context.Context, callExit, error) {
	if ctx.Done() == nil {
		return l.enter(ctx, true) // ctx never ends: its own release context
	}
	rctx, cancel := context.WithCancelCause(l.graceBg)
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(releaseGrace, func() { cancel(nil) }) })
	return l.register(&closingCtx{Context: ctx, end: rctx}, callExit{l: l, stop: stop, cancel: cancel})
}

// register counts a call that enter derived cctx for, unless the Locker is
// closed.
func (l *Locker) register(cctx context.Context, x callExit) (context.Context, callExit, error) {
	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		x.release()
		return nil, callExit{}, ErrClosed
	}
	l.calls++
	l.mu.Unlock()
	return cctx, x, nil
}

// callExit ends a call that enter registered.
type callExit struct {
	l      *Locker
	stop   func() bool             // nil for a closingCtx
	cancel context.CancelCauseFunc // nil for a closingCtx
}

// release undoes what enter derived from the caller's context.
func (x callExit) release() {
	if x.stop != nil {
		x.stop()
		x.cancel(nil)
	}
}

// done deregisters the call: Close waits for none left.
func (x callExit) done() {
	x.release()
	l := x.l
	l.mu.Lock()
	l.calls--
	if l.calls == 0 && l.isClosed {
		l.idle.Broadcast()
	}
	l.mu.Unlock()
}

// closingCtx is a call's context that has its caller's values and the end
// of another context (end): for a caller's context that never ends (its
// Done is nil), the Locker's life or grace, which is what
// context.WithCancelCause with a context.AfterFunc on end would give,
// without either; for a release (enterRelease), the context derived under
// grace that also ends releaseGrace after the caller's.
type closingCtx struct {
	context.Context // the caller's
	end             context.Context
}

func (c *closingCtx) Done() <-chan struct{} { return c.end.Done() }
func (c *closingCtx) Err() error            { return c.end.Err() }

// Deadline is end's (none): the caller's context either never ends
// (enter) or is outlived on purpose (enterRelease).
func (c *closingCtx) Deadline() (time.Time, bool) { return c.end.Deadline() }

// Value looks in end first: it has no values, its parents being grace or
// life and context.Background, but it answers the context package's own
// lookup of the nearest cancellable context, so that context.Cause finds
// end's cause (ErrClosed) and a context derived from this one is cancelled
// by end directly, without a goroutine or a callback; the caller's own
// cancellable context is never found.
func (c *closingCtx) Value(key any) any {
	if v := c.end.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// closedDuring reports whether a call whose context is cctx failed because
// the Locker was closed under it (rather than because the caller's own
// context ended).
func closedDuring(cctx context.Context) bool {
	return errors.Is(context.Cause(cctx), ErrClosed)
}

// track registers a new hold and makes it its Mutex's current hold, in one
// step under l.mu. It fails if Close has begun: the caller must then give
// the grant back.
func (l *Locker) track(h *hold) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isClosed {
		return ErrClosed
	}
	l.holds[h] = struct{}{}
	h.m.mu.Lock()
	h.m.h = h
	h.m.mu.Unlock()
	return nil
}

// background registers a goroutine that Close waits for before it closes
// the driver (an Election's observer). It fails with ErrClosed once Close
// has begun; otherwise the caller calls done exactly once: when the
// goroutine ends, or when it gives up before starting it.
func (l *Locker) background() (done func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.isClosed {
		return nil, ErrClosed
	}
	l.wg.Add(1)
	return l.wg.Done, nil
}

func (l *Locker) untrack(h *hold) {
	l.mu.Lock()
	delete(l.holds, h)
	l.mu.Unlock()
}

// Close releases every lock still held through this Locker, then closes
// the backend connection. Later calls return ErrClosed. Closing twice is
// harmless.
//
// Once Close has begun, no Lock or TryLock returns success: calls in
// flight are cut short and return ErrClosed, and a lock granted to one
// of them during Close is released by that call before it returns.
// Close waits for every call in flight (an Unlock in flight is given up
// to 5s to finish its release), then releases every hold granted before,
// so that when Close returns no lock taken through this Locker is left
// on the server and no call is still running.
func (l *Locker) Close() error {
	if l == nil {
		return fmt.Errorf("dlock: close: %w: a nil *Locker", ErrInvalidOption)
	}
	l.mu.Lock()
	if l.isClosed {
		l.mu.Unlock()
		return nil
	}
	l.isClosed = true
	l.endLife(ErrClosed)
	graceTimer := time.AfterFunc(closeReleaseTimeout, func() { l.endGrace(ErrClosed) })
	for l.calls > 0 {
		l.idle.Wait()
	}
	holds := make([]*hold, 0, len(l.holds))
	for h := range l.holds {
		holds = append(holds, h)
	}
	l.mu.Unlock()
	graceTimer.Stop()
	l.endGrace(ErrClosed)

	ctx, cancel := context.WithTimeout(context.Background(), closeReleaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.m.release(ctx, h, ErrClosed)
		}()
	}
	wg.Wait()
	l.sched.close()
	l.wg.Wait()
	errs := []error{l.drv.Close()}
	for _, fn := range l.defaults.onClose {
		errs = append(errs, fn())
	}
	return errors.Join(errs...)
}

// backendName names a driver for observers when Open did not (a backend's
// constructor over a caller's client): its Scheme method if it has one,
// else the last element of its package path (redis, etcd, memory, ...).
func backendName(d driver.Locker) string {
	if n, ok := d.(interface{ Scheme() string }); ok {
		return n.Scheme()
	}
	t := reflect.TypeOf(d)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return path.Base(t.PkgPath())
}

// checkKey rejects a key no backend can take.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	}
	if len(key) > driver.MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), driver.MaxKeyLen)
	}
	return nil
}
