package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.LockWatcher = (*Driver)(nil)

// WatchLock (driver.LockWatcher) is Watch for a waiting Lock: key's next
// refused attempts through this Driver wait in line: TryAcquire joins the
// key's line on every instance that refuses it, and a release hands the
// lock to the first live member of each instance's line, told on that
// member's inbox channel, instead of waking every waiter (see claimGrants
// and the package doc). Watch returns once the Driver's inbox is
// subscribed on a majority of instances. A release publishes on every
// instance the holder had, a majority, so the waiter hears a majority of
// grants when it stands first on them. Expiry publishes nothing: the
// portable layer also waits for the remaining lease reported by
// TryAcquire (at most a third of a lease for a waiter, which so refreshes
// its entries), and that also bounds the wait behind a dead waiter until
// its entry runs out (one lease without refresh).
//
// The inbox is one channel per Driver and instance, subscribed by the
// first WatchLock and kept until Close: a wait costs no SUBSCRIBE. The
// watches of one key in one Driver share one queue member.
//
// Watch (every release wakes every watch) stays what observers use, such as
// dlock.Election's: they never attempt, so they never stand in line.
func (d *Driver) WatchLock(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	if err := d.inboxReady(ctx); err != nil {
		return nil, err
	}
	w := &lockWatch{d: d, ch: make(chan struct{}, 1)}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isClosed {
		return nil, driver.ErrClosed
	}
	kw := d.waiting[key]
	if kw == nil {
		d.seq++
		kw = &keyWatch{key: key, member: d.inbox + "." + strconv.FormatUint(d.seq, 36), watches: map[*lockWatch]struct{}{}}
		kw.score.Store(time.Now().UnixMicro())
		d.waiting[key] = kw
		d.members[kw.member] = kw
	}
	kw.watches[w] = struct{}{}
	w.kw = kw
	return w, nil
}

// keyWatch is one key's place in the wake queues, shared by the Driver's
// watches of that key.
type keyWatch struct {
	key     string
	member  string // the queue member: the Driver's inbox, '.', a number
	watches map[*lockWatch]struct{}
	// queued is set when the last attempt was refused somewhere, so the
	// member may stand in a queue: the last watch to close leaves them.
	queued atomic.Bool
	// life is how long the member's entries live unrefreshed (ns).
	life atomic.Int64
	// wokenBy is the owner whose release woke the watches last, heard
	// the instances whose message of that release came (d.mu), and wakes
	// counts the releases that woke them: an attempt made after the
	// latest one (attempt.wakes) may have overtaken it somewhere.
	wokenBy string
	heard   []bool
	wakes   atomic.Uint64
	// last is the member's last attempt: its answers say where the member
	// left the queues (granted there) and where it may still stand.
	last atomic.Pointer[attempt]
	// score is the member's place in the wake queues, sent with each
	// attempt to every instance so that all of them order the waiters
	// alike: when the wait began (µs since the epoch, this client's clock),
	// or when its last attempt that followed a wake was sent. Such an
	// attempt goes to the back where it is refused: the release that woke
	// it went to someone else (the releaser's next Lock, a Locker that
	// does not wait), and the next release wakes the next waiter, so that
	// none is passed over for ever. tried is wakes when the last attempt
	// was sent: an attempt follows a wake when wakes has moved since.
	score atomic.Int64
	tried atomic.Uint64
	// grants are the releases that handed the lock to member since its
	// last attempt was sent, by instance (nil where none came), and grace
	// wakes the watches when a majority has not come soon after the first
	// (d.mu; see claimGrants).
	grants []*handed
	grace  *time.Timer
	// formed is set once the member's grants made a hold: the member is
	// then a holder's owner, and no later attempt of kw may give its
	// grants back (see claimGrants).
	formed atomic.Bool
}

// place returns the score for an attempt sent now that saw wakes releases.
func (kw *keyWatch) place(wakes uint64) int64 {
	if kw.tried.Swap(wakes) == wakes {
		return kw.score.Load()
	}
	now := time.Now().UnixMicro()
	for {
		// Never forward of where it stood, whatever the clock does.
		old := kw.score.Load()
		s := max(now, old+1)
		if kw.score.CompareAndSwap(old, s) {
			return s
		}
	}
}

// wake wakes the watches of kw. d.mu is held.
func (kw *keyWatch) wake() {
	for w := range kw.watches {
		w.wake()
	}
}

// overtaken wakes the watches of kw again when a's refusals show that it
// overtook, on an instance whose message of it already came, the release
// that woke it: the releaser still held the lock there when a reached it.
// Such a message found a's answer there not yet in, so route left it
// (see route); no other message of that release will come.
func (d *Driver) overtaken(kw *keyWatch, a *attempt, refused []refusal, refusedAt []int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if kw.wokenBy == "" || a.wakes != kw.wakes.Load() {
		return
	}
	for k, i := range refusedAt {
		if refused[k].holder == kw.wokenBy && kw.heard[i] {
			kw.wake()
			return
		}
	}
}

// endedMember is a member whose wait ended, kept while an entry of it may
// still stand in a queue.
type endedMember struct {
	key   string
	until time.Time
	last  *attempt
	n     uint64 // which remember wrote it
}

// endedRef is one remember in d.endedOrder: the member and the number of
// the remember that wrote it, which its entry in d.ended still has unless
// a later remember or stale replaced or dropped it.
type endedRef struct {
	member string
	n      uint64
}

// maxEnded bounds the ended members a Driver remembers. One that is
// forgotten early only costs a wake on that instance: the waiters behind
// it are woken by their next attempt, or by the next release.
const maxEnded = 1024

// forget records that kw's wait ended. d.mu is held.
func (d *Driver) forget(kw *keyWatch) {
	kw.stopGrace()
	d.remember(kw.member, endedMember{key: kw.key, until: time.Now().Add(time.Duration(kw.life.Load())), last: kw.last.Load()})
}

// remember records e for member in d.ended, which keeps at most maxEnded
// members: the oldest go first, and with them those whose time is up. It
// costs the same however full d.ended is: every Lock that waits forgets
// its member, and a scan of d.ended for the ones to drop cost an
// uncontended Redlock Lock+Unlock loop 3% of its CPU. d.mu is held.
func (d *Driver) remember(member string, e endedMember) {
	now := time.Now()
	for len(d.endedOrder) > 0 {
		o := d.endedOrder[0]
		cur, ok := d.ended[o.member]
		current := ok && cur.n == o.n
		if current && len(d.ended) < maxEnded && now.Before(cur.until) {
			break
		}
		if current {
			delete(d.ended, o.member)
		}
		d.endedOrder[0] = endedRef{}
		d.endedOrder = d.endedOrder[1:]
	}
	d.endedN++
	e.n = d.endedN
	d.ended[member] = e
	d.endedOrder = append(d.endedOrder, endedRef{member, e.n})
	if len(d.endedOrder) > 2*maxEnded {
		// Refs replaced or dropped since (stale) pile up behind a live
		// oldest one: keep the current ones only.
		live := make([]endedRef, 0, len(d.ended))
		for _, o := range d.endedOrder {
			if cur, ok := d.ended[o.member]; ok && cur.n == o.n {
				live = append(live, o)
			}
		}
		d.endedOrder = live
	}
}

// stale returns the key of a member whose wait ended and whose entry may
// still stand in instance inst's queue: its last attempt did not take the
// lock there (which removes the entry). d.mu is held.
func (d *Driver) stale(member string, inst int) (string, bool) {
	e, ok := d.ended[member]
	if !ok || !time.Now().Before(e.until) {
		delete(d.ended, member)
		return "", false
	}
	if e.last != nil && e.last.answers[inst].Load() == ansGranted {
		return "", false
	}
	return e.key, true
}

// member returns the queue member of key's watches, "" when nobody waits
// for key through d.
func (d *Driver) member(key string) *keyWatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.waiting[key]
}

// leaveRequest removes member from key's line: the release script with
// the member as owner. When a release had handed the member the lock, it
// is released and handed on to the next live member; when the member stood
// first and the lock is free, it is handed to the next one too.
func (d *Driver) leaveRequest(key, member string) request {
	return d.releaseRequest(key, member, true)
}

// route wakes the watches of the member a release on instance inst named;
// "" wakes every watch (the pub/sub connection broke: a wake may have been
// missed). A member nobody here waits as any more (its wait ended and an
// attempt's late refusal put it back in that queue) passes the wake on: it
// leaves that instance's queue, which wakes the next member there.
func (d *Driver) route(inst int, payload string) {
	if g, ok := redislua.ParseGrant(payload); ok {
		d.handed(inst, g)
		return
	}
	member, releaser, _ := strings.Cut(payload, " ")
	d.mu.Lock()
	defer d.mu.Unlock()
	if member == "" {
		for _, kw := range d.waiting {
			kw.wake()
		}
		return
	}
	if kw := d.members[member]; kw != nil {
		// One release wakes a waiter on every instance where it stands
		// first: the first message is enough, unless the attempt it woke
		// was refused on this instance. The release there came after
		// that attempt, and this message is the only news of it.
		if releaser == "" || releaser != kw.wokenBy {
			kw.wokenBy = releaser
			kw.heard = make([]bool, len(d.inst))
			kw.heard[inst] = true
			kw.wakes.Add(1)
			kw.wake()
			return
		}
		kw.heard[inst] = true
		if a := kw.last.Load(); a != nil && a.wakes == kw.wakes.Load() && a.answers[inst].Load() == ansRefused {
			kw.wake()
		}
		return
	}
	key, ok := d.stale(member, inst)
	if !ok || d.isClosed {
		return
	}
	// Queued, not awaited: this runs on the hub's reader.
	d.inst[inst].batch.submit(d.leaveRequest(key, member), d.timeout(0), newGroup(1, 0, nil))
}

// inboxReady subscribes the Driver's inbox on every instance not yet
// subscribed, and returns once a majority is. The subscriptions run in the
// background with a timeout of their own, longer than a request's (they
// are made once per Driver), so that a waiter on a loaded machine is not
// failed for a slow confirmation.
func (d *Driver) inboxReady(ctx context.Context) error {
	for {
		d.mu.Lock()
		if d.isClosed {
			d.mu.Unlock()
			return driver.ErrClosed
		}
		if d.hub == nil {
			for i, in := range d.inst {
				d.hub = append(d.hub, newHub(in, i, d.cfg.Timeout))
			}
		}
		if d.inboxSub == nil {
			d.inboxSub = &watch{d: d, route: d.route, channel: redislua.InboxChannel(d.names("").inbox, d.inbox)}
			d.subState = make([]error, len(d.inst))
			d.subReady = make([]bool, len(d.inst))
			d.subBusy = make([]bool, len(d.inst))
			d.subLoop = make([]bool, len(d.inst))
			d.subChange = make(chan struct{})
		}
		ready, busy := 0, 0
		for i, h := range d.hub {
			switch {
			case d.subReady[i]:
				ready++
			case d.subBusy[i]:
				busy++
			case !d.subLoop[i]:
				d.subBusy[i], d.subLoop[i] = true, true
				busy++
				h.in.requests.Add(1)
				d.subWG.Add(1)
				go d.subscribeInbox(i, h)
			}
		}
		if ready >= d.quorum {
			d.mu.Unlock()
			return nil
		}
		changed := d.subChange
		var firstErr error
		for _, err := range d.subState {
			if err != nil {
				firstErr = err
				break
			}
		}
		d.mu.Unlock()
		if ready+busy < d.quorum {
			return driver.Unavailable(fmt.Errorf("redlock: subscribed on %d of %d instances, %d needed: %w",
				ready, len(d.inst), d.quorum, firstErr))
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// inboxOnAny reports whether the Driver's inbox is subscribed on any of the
// instances idx.
func (d *Driver) inboxOnAny(idx []int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, i := range idx {
		if d.subReady != nil && d.subReady[i] {
			return true
		}
	}
	return false
}

// subscribeInbox subscribes the inbox on instance i and reports each
// outcome to inboxReady. After a failure (the instance is down) it tries
// again in the background, backing off up to a second, until it succeeds or
// the Driver closes; the first attempt alone decides a waiting inboxReady.
// A subscription made late wakes every waiting Lock: a release on that
// instance may not have reached them.
func (d *Driver) subscribeInbox(i int, h *hub) {
	defer d.subWG.Done()
	backoff := 50 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(d.life, max(10*d.cfg.Timeout, 2*time.Second))
		err := h.subscribe(sctx, d.inboxSub)
		cancel()
		if err != nil {
			h.in.errors.Add(1)
			if errors.Is(err, context.DeadlineExceeded) {
				h.in.timeouts.Add(1)
			}
			err = fmt.Errorf("instance %s: %w", h.in.addr, err)
		}
		d.mu.Lock()
		late := !d.subBusy[i]
		d.subBusy[i] = false
		d.subReady[i] = err == nil
		d.subState[i] = err
		if err == nil || d.isClosed {
			d.subLoop[i] = false
		}
		close(d.subChange)
		d.subChange = make(chan struct{})
		d.mu.Unlock()
		if err == nil {
			if late {
				d.route(i, "")
			}
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-d.life.Done():
			t.Stop()
			d.mu.Lock()
			d.subLoop[i] = false
			d.mu.Unlock()
			return
		}
		backoff = min(2*backoff, time.Second)
	}
}

// lockWatch is one waiting Lock of a key.
type lockWatch struct {
	d  *Driver
	kw *keyWatch
	ch chan struct{}

	closeOnce sync.Once
}

func (w *lockWatch) Changed() <-chan struct{} { return w.ch }

func (w *lockWatch) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Close ends the wait. The last watch of a key whose member may stand in a
// queue leaves the queue on every instance where it may, in parallel
// (bounded by the per-instance timeout), waking the next member where it
// stood first and the lock is free; an instance that does not answer drops
// the entry when it runs out.
func (w *lockWatch) Close() error {
	w.closeOnce.Do(func() {
		d, kw := w.d, w.kw
		d.mu.Lock()
		member := kw.member
		delete(kw.watches, w)
		last := len(kw.watches) == 0
		if last {
			delete(d.waiting, kw.key)
			delete(d.members, kw.member)
			d.forget(kw)
		}
		d.mu.Unlock()
		if !last || !kw.queued.Load() {
			return
		}
		select {
		case <-d.closed:
			return
		default:
		}
		// Where the last attempt took the lock, it left the line already
		// (and any earlier attempt's entry there went before it).
		where := d.all
		if a := kw.last.Load(); a != nil {
			where = a.where(func(st int32) bool { return st != ansGranted })
		}
		if len(where) == 0 {
			return
		}
		timeout := d.timeout(0)
		ctx, cancel := context.WithTimeout(d.life, timeout)
		defer cancel()
		d.fanout(ctx, timeout, where, d.leaveRequest(kw.key, member), len(where), nil)
	})
	return nil
}
