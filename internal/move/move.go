package move

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// Driver is the move's driver.Locker: C1 (from and to) or C2 (to alone).
type Driver struct {
	from    driver.Locker // nil in C2
	to      driver.Locker
	fromRec driver.Recorder
	toRec   driver.Recorder
	fromIns driver.Inspector
	toIns   driver.Inspector
	limits  driver.Limits

	mu     sync.Mutex
	commit *Record // once read, for good
}

var (
	_ driver.Locker    = (*Driver)(nil)
	_ driver.Inspector = (*Driver)(nil)
	_ driver.Recorder  = (*Driver)(nil)
	_ driver.Limiter   = (*Driver)(nil)
)

// releaseTimeout bounds the release of a first store's hold when the
// second refused.
const releaseTimeout = 5 * time.Second

// capable checks that d has what the move needs of a store.
func capable(d driver.Locker, which string) (driver.Recorder, driver.Inspector, error) {
	rec, ok := d.(driver.Recorder)
	if !ok {
		return nil, nil, fmt.Errorf("%w: move: the %s store keeps no records (driver.Recorder)", driver.ErrInvalidOption, which)
	}
	ins, ok := d.(driver.Inspector)
	if !ok {
		return nil, nil, fmt.Errorf("%w: move: the %s store cannot inspect keys (driver.Inspector)", driver.ErrInvalidOption, which)
	}
	return rec, ins, nil
}

func limitsOf(d driver.Locker) driver.Limits {
	if l, ok := d.(driver.Limiter); ok {
		return l.Limits()
	}
	return driver.Limits{}
}

// Intersect returns the TTLs both a and b honour, or an error matching
// ErrInvalidOption when there are none.
func Intersect(a, b driver.Limits) (driver.Limits, error) {
	out := driver.Limits{MinTTL: max(a.MinTTL, b.MinTTL)}
	switch {
	case a.MaxTTL == 0:
		out.MaxTTL = b.MaxTTL
	case b.MaxTTL == 0:
		out.MaxTTL = a.MaxTTL
	default:
		out.MaxTTL = min(a.MaxTTL, b.MaxTTL)
	}
	if out.MaxTTL != 0 && out.MinTTL > out.MaxTTL {
		return out, fmt.Errorf("%w: move: the stores honour no common TTL (one from %v to %v, the other from %v to %v)",
			driver.ErrInvalidOption, a.MinTTL, maxText(a.MaxTTL), b.MinTTL, maxText(b.MaxTTL))
	}
	return out, nil
}

func maxText(d time.Duration) string {
	if d == 0 {
		return "any"
	}
	return d.String()
}

// NewC1 returns the move's first configuration over from (X) and to (Y).
// It refuses two drivers on one store (a record written through one is
// read through the other) and stores with no TTL in common. The Driver
// owns both: its Close closes them.
func NewC1(ctx context.Context, from, to driver.Locker) (*Driver, error) {
	fromRec, fromIns, err := capable(from, "old")
	if err != nil {
		return nil, err
	}
	toRec, toIns, err := capable(to, "new")
	if err != nil {
		return nil, err
	}
	lim, err := Intersect(limitsOf(from), limitsOf(to))
	if err != nil {
		return nil, err
	}
	if err := distinct(ctx, fromRec, toRec); err != nil {
		return nil, err
	}
	return &Driver{from: from, to: to, fromRec: fromRec, toRec: toRec, fromIns: fromIns, toIns: toIns, limits: lim}, nil
}

// NewC2 returns the move's last configuration over to (Y), which must
// hold the commit record: else an error matching ErrNotCommitted and
// ErrInvalidOption.
func NewC2(ctx context.Context, to driver.Locker) (*Driver, error) {
	toRec, toIns, err := capable(to, "new")
	if err != nil {
		return nil, err
	}
	d := &Driver{to: to, toRec: toRec, toIns: toIns, limits: limitsOf(to)}
	r, err := ReadCommit(ctx, to)
	if errors.Is(err, ErrNotCommitted) {
		return nil, fmt.Errorf("%w: move: %w: run lockctl move commit once every instance runs move:?from=...&to=... (docs/moving.md)", driver.ErrInvalidOption, err)
	}
	if err != nil {
		return nil, err
	}
	d.commit = &r
	return d, nil
}

// distinct writes a random record through a and proposes another through
// b: if b returns a's, both name one store.
func distinct(ctx context.Context, a, b driver.Recorder) error {
	var n [16]byte
	_, _ = rand.Read(n[:])
	key := Prefix + "probe/" + hex.EncodeToString(n[:])
	if _, err := a.Record(ctx, key, "from"); err != nil {
		return err
	}
	defer func() { _, _ = a.ClearRecord(context.WithoutCancel(ctx), key, "from") }()
	v, err := b.Record(ctx, key, "to")
	if err != nil {
		return err
	}
	if v == "from" {
		return fmt.Errorf("%w: move: from and to name the same store", driver.ErrInvalidURL)
	}
	_, _ = b.ClearRecord(ctx, key, "to")
	return nil
}

// Limits are the TTLs both stores honour.
func (d *Driver) Limits() driver.Limits { return d.limits }

// committed returns the commit record, nil while there is none. A C1
// Driver looks on Y at each call until it finds one.
func (d *Driver) committed(ctx context.Context) (*Record, error) {
	d.mu.Lock()
	r := d.commit
	d.mu.Unlock()
	if r != nil {
		return r, nil
	}
	got, err := ReadCommit(ctx, d.to)
	if errors.Is(err, ErrNotCommitted) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.commit = &got
	d.mu.Unlock()
	return &got, nil
}

// holdState is a move hold's driver.Hold.State.
type holdState struct {
	x, y  driver.Hold // x is zero in C2
	loss  *driver.Loss
	stops []func() bool
	done  chan struct{} // closed by release: ends the loss goroutine
	once  sync.Once
}

func (d *Driver) config() Config {
	if d.from == nil {
		return C2
	}
	return C1
}

// TryAcquire takes req.Key on X, then on Y (C1), or on Y alone (C2), and
// computes the token the hold presents.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	req.Meta = Tag(req.Key, req.Meta, d.config())
	var hx driver.Hold
	since := time.Now()
	if d.from != nil {
		h, err := d.from.TryAcquire(ctx, req)
		if err != nil {
			return driver.Hold{}, err
		}
		hx = h
		if !h.Since.IsZero() {
			since = h.Since
		}
	}
	sentY := time.Now()
	hy, err := d.to.TryAcquire(ctx, req)
	if err != nil {
		d.releaseX(ctx, hx)
		return driver.Hold{}, err
	}
	if !hy.Since.IsZero() {
		sentY = hy.Since
	}
	return d.finish(ctx, req.Key, hx, since, hy, sentY)
}

// finish computes the token of a hold granted on every store of the
// configuration (hx is zero in C2) and makes the composite hold, whose
// window runs from the earlier start for the shorter lease. A hold whose
// token cannot be computed is given back.
func (d *Driver) finish(ctx context.Context, key string, hx driver.Hold, sinceX time.Time, hy driver.Hold, sinceY time.Time) (driver.Hold, error) {
	since := sinceY
	if d.from != nil {
		since = minTime(sinceX, sinceY)
	}
	token, err := d.token(ctx, key, hx.Token, hy.Token)
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		_ = d.to.Release(rctx, hy)
		d.releaseX(rctx, hx)
		return driver.Hold{}, err
	}
	ttl := hy.TTL
	if d.from != nil {
		ttl = min(hx.TTL, hy.TTL)
	}
	st := &holdState{x: hx, y: hy, loss: new(driver.Loss), done: make(chan struct{})}
	d.watchLoss(st)
	return driver.Hold{Token: token, TTL: ttl, Since: since, Lost: st.loss.Chan(), State: st}, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// releaseX gives back X's hold after Y refused (nothing in C2).
func (d *Driver) releaseX(ctx context.Context, hx driver.Hold) {
	if d.from == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = d.from.Release(rctx, hx)
}

// token is what the hold presents: X's token before the commit; after it,
// Y's plus the key's base, written first if the key has none (X's + 1 -
// Y's in C1, the commit's ceiling in C2). It is called while the hold is
// held on every store of the configuration.
func (d *Driver) token(ctx context.Context, key string, x, y uint64) (uint64, error) {
	r, err := d.committed(ctx)
	if err != nil {
		return 0, err
	}
	if r == nil {
		return x, nil // C1 before the commit (C2 always has one)
	}
	var proposed int64
	if d.from != nil {
		if x >= 1<<62 || y >= 1<<62 {
			return 0, fmt.Errorf("move: tokens %d and %d too large to relate", x, y)
		}
		proposed = int64(x) + 1 - int64(y)
	} else {
		proposed = int64(r.OG)
	}
	b, err := base(ctx, d.toRec, key, proposed)
	if err != nil {
		return 0, err
	}
	return lift(y, b)
}

// watchLoss marks st's loss when either store's hold is lost.
func (d *Driver) watchLoss(st *holdState) {
	var chans []<-chan struct{}
	for _, p := range []struct {
		drv driver.Locker
		h   driver.Hold
	}{{d.from, st.x}, {d.to, st.y}} {
		if p.drv == nil || p.h.Lost == nil {
			continue
		}
		if n, ok := p.drv.(driver.LossNotifier); ok {
			st.stops = append(st.stops, n.OnLost(p.h, func() { st.loss.Mark() }))
			continue
		}
		chans = append(chans, p.h.Lost)
	}
	if len(chans) == 0 {
		return
	}
	go func() {
		var a, b <-chan struct{}
		a = chans[0]
		if len(chans) > 1 {
			b = chans[1]
		}
		select {
		case <-a:
			st.loss.Mark()
		case <-b:
			st.loss.Mark()
		case <-st.done:
		}
	}()
}

// ended stops watching st's loss.
func (st *holdState) ended() {
	st.once.Do(func() {
		close(st.done)
		for _, stop := range st.stops {
			stop()
		}
	})
}

func stateOf(h driver.Hold) (*holdState, error) {
	st, ok := h.State.(*holdState)
	if !ok {
		return nil, fmt.Errorf("move: foreign hold: %w", driver.ErrNotHeld)
	}
	return st, nil
}

// Release frees Y's hold, then X's.
func (d *Driver) Release(ctx context.Context, h driver.Hold) error {
	st, err := stateOf(h)
	if err != nil {
		return err
	}
	st.ended()
	errY := d.to.Release(ctx, st.y)
	var errX error
	if d.from != nil {
		errX = d.from.Release(ctx, st.x)
	}
	return errors.Join(errY, errX)
}

// ReleaseAfter (driver.Lapser) lets Y's hold lapse, then X's: each key
// stays held for d on its own store, so that a minimum hold
// (dlock.WithMinHold) keeps out every configuration beside this one, C0
// on X and C2 on Y alike. A store that cannot lapse refuses it with
// ErrInvalidOption (every dlock backend can).
func (d *Driver) ReleaseAfter(ctx context.Context, h driver.Hold, after time.Duration) error {
	st, err := stateOf(h)
	if err != nil {
		return err
	}
	ly, okY := d.to.(driver.Lapser)
	lx, okX := d.from.(driver.Lapser)
	if !okY || (d.from != nil && !okX) {
		return fmt.Errorf("move: %w: a store of the move cannot keep a key held past its release", driver.ErrInvalidOption)
	}
	st.ended()
	errY := ly.ReleaseAfter(ctx, st.y, after)
	var errX error
	if d.from != nil {
		errX = lx.ReleaseAfter(ctx, st.x, after)
	}
	return errors.Join(errY, errX)
}

// Renew extends both holds and returns the shorter TTL granted.
func (d *Driver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	st, err := stateOf(h)
	if err != nil {
		return 0, err
	}
	ttl, err := d.to.Renew(ctx, st.y)
	if err != nil {
		return 0, err
	}
	if d.from != nil {
		tx, err := d.from.Renew(ctx, st.x)
		if err != nil {
			return 0, err
		}
		ttl = min(ttl, tx)
	}
	return ttl, nil
}

// Watch watches key on both stores: a change on either is a change.
func (d *Driver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	wy, err := d.to.Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	if d.from == nil {
		return wy, nil
	}
	wx, err := d.from.Watch(ctx, key)
	if err != nil {
		_ = wy.Close()
		return nil, err
	}
	w := &watch{x: wx, y: wy, changed: make(chan struct{}, 1), stop: make(chan struct{})}
	go w.run()
	return w, nil
}

// watch merges the two stores' watches of a key.
type watch struct {
	x, y    driver.Watch
	changed chan struct{}
	stop    chan struct{}
	once    sync.Once
	errs    error
}

func (w *watch) run() {
	defer close(w.changed)
	for {
		var ok bool
		select {
		case _, ok = <-w.x.Changed():
		case _, ok = <-w.y.Changed():
		case <-w.stop:
			return
		}
		if !ok {
			return // one broke: the merged watch breaks too
		}
		select {
		case w.changed <- struct{}{}:
		default:
		}
	}
}

func (w *watch) Changed() <-chan struct{} { return w.changed }

func (w *watch) Close() error {
	w.once.Do(func() {
		close(w.stop)
		w.errs = errors.Join(w.y.Close(), w.x.Close())
	})
	return w.errs
}

// Inspect reports the key's holder: on Y if Y has one (C1 or C2), else
// on X (C0 or C1); its configuration's tag is taken off the description.
// The token is the one the holder presents: Y's plus the key's base once
// the key has one, else X's.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	iy, err := d.toIns.Inspect(ctx, key)
	if err != nil {
		return driver.Info{}, err
	}
	var ix driver.Info
	if d.from != nil {
		if ix, err = d.fromIns.Inspect(ctx, key); err != nil {
			return driver.Info{}, err
		}
	}
	return d.present(ctx, key, ix, iy)
}

// present merges what each store reported of key.
func (d *Driver) present(ctx context.Context, key string, ix, iy driver.Info) (driver.Info, error) {
	out := ix
	if iy.Held || !ix.Held {
		out = iy
		if iy.Held {
			b, ok, err := peekBase(ctx, d.toRec, key)
			if err != nil {
				return driver.Info{}, err
			}
			switch {
			case ok:
				if out.Token, err = lift(iy.Token, b); err != nil {
					return driver.Info{}, err
				}
			case ix.Held:
				out.Token = ix.Token // C1 before the commit: X's token
			default:
				out.Token = 0 // a C2 holder writing its base: not known yet
			}
		}
	}
	_, out.Meta = Untag(out.Meta)
	out.Waiters = -1 // a move's Lock waits by watching, in no server queue
	return out, nil
}

// Break removes key's hold on Y, then on X.
func (d *Driver) Break(ctx context.Context, key string) (driver.Info, error) {
	iy, err := d.toIns.Break(ctx, key)
	if err != nil {
		return driver.Info{}, err
	}
	var ix driver.Info
	if d.from != nil {
		if ix, err = d.fromIns.Break(ctx, key); err != nil {
			return driver.Info{}, err
		}
	}
	return d.present(ctx, key, ix, iy)
}

// Record records on X and copies X's value to Y (C1), so that C2 finds
// what C0 and C1 clients recorded; on Y alone in C2. Keys under Prefix
// are the move's own and refused.
func (d *Driver) Record(ctx context.Context, key, value string) (string, error) {
	if err := driver.CheckRecord(key, value); err != nil {
		return "", err
	}
	if strings.HasPrefix(key, Prefix) {
		return "", fmt.Errorf("record: %w: keys starting %q are reserved for moves", driver.ErrInvalidKey, Prefix)
	}
	if d.from == nil {
		return d.toRec.Record(ctx, key, value)
	}
	v, err := d.fromRec.Record(ctx, key, value)
	if err != nil {
		return "", err
	}
	// X's record is the key's record while C0 clients may run; Y's is a
	// copy, replaced when it differs (a copy that landed after a clear).
	for range maxProposals {
		w, err := d.toRec.Record(ctx, key, v)
		if err != nil {
			return "", err
		}
		if w == v {
			return v, nil
		}
		if _, err := d.toRec.ClearRecord(ctx, key, w); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("move: record %q is %s on the old store and keeps changing on the new one: %w", key, strconv.Quote(v), driver.ErrUnavailable)
}

// ClearRecord clears on Y, then X.
func (d *Driver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := driver.CheckRecord(key, value); err != nil {
		return false, err
	}
	if strings.HasPrefix(key, Prefix) {
		return false, fmt.Errorf("record: %w: keys starting %q are reserved for moves", driver.ErrInvalidKey, Prefix)
	}
	ok, err := d.toRec.ClearRecord(ctx, key, value)
	if err != nil || d.from == nil {
		return ok, err
	}
	okX, err := d.fromRec.ClearRecord(ctx, key, value)
	return ok || okX, err
}

// Close closes both stores' drivers.
func (d *Driver) Close() error {
	err := d.to.Close()
	if d.from != nil {
		err = errors.Join(d.from.Close(), err)
	}
	return err
}
