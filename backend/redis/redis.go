package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
	"github.com/dlock-go/dlock/internal/redislua"
)

// Config configures the backend. The zero value is usable: prefix "dlock",
// no replica acknowledgement, and a refusal of servers that may evict keys.
type Config struct {
	// Prefix starts the hash tag of every key this backend writes
	// ("{dlock:KEY}:lock"). Lockers with different prefixes never see each
	// other's locks. It must not contain '{' or '}'. Default "dlock".
	// URL parameter: prefix.
	Prefix string

	// WaitReplicas, when positive, makes every acquire and renew wait
	// (Redis WAIT) until that many replicas have the write. An acquire
	// that fewer replicas acknowledged within WaitTimeout is undone and
	// fails with ErrReplicas; such a renew fails (and is retried by the
	// watchdog). For primary/replica setups where a failover must not
	// lose a granted lock. URL parameter: wait_replicas.
	WaitReplicas int

	// WaitTimeout bounds each WAIT. Default 500ms; the caller's context
	// deadline shortens it. URL parameter: wait_timeout.
	WaitTimeout time.Duration

	// AllowEviction accepts a server whose maxmemory-policy is not
	// noeviction. Without it, opening such a server fails with
	// ErrEvictionPolicy, and so does an acquire once a later check finds
	// one (see ErrEvictionPolicy for when the policy is read again).
	// URL parameter: allow_eviction.
	AllowEviction bool
}

// DefaultWaitTimeout is the WAIT timeout when Config.WaitTimeout is zero.
const DefaultWaitTimeout = 500 * time.Millisecond

// releaseMessage is what a release publishes; waiters only need the wake-up.
const releaseMessage = "released"

// cleanupTimeout bounds the background release that undoes an acquire whose
// outcome is unknown.
const cleanupTimeout = 5 * time.Second

func (o Config) normalize() (Config, error) {
	out := o
	if out.Prefix == "" {
		out.Prefix = DefaultPrefix
	}
	if err := checkPrefix(out.Prefix); err != nil {
		return out, err
	}
	if out.WaitReplicas < 0 {
		return out, fmt.Errorf("WaitReplicas %d is negative", out.WaitReplicas)
	}
	if out.WaitTimeout < 0 {
		return out, fmt.Errorf("WaitTimeout %v is negative", out.WaitTimeout)
	}
	if out.WaitTimeout == 0 {
		out.WaitTimeout = DefaultWaitTimeout
	}
	return out, nil
}

// New returns a Locker over client, a go-redis client that stays the
// caller's: Close of the Locker releases its locks but does not close the
// client, which the caller closes after the Locker. client is a *redis.Client
// (standalone, or Sentinel-backed from redis.NewFailoverClient) or a
// *redis.ClusterClient. A redis.Ring is refused: its shards are independent
// servers and a shard that goes away moves its keys to another, which
// breaks exclusion.
//
// New talks to the server once, to check that it is reachable (else an
// error matching dlock.ErrUnavailable), that its maxmemory-policy cannot
// evict keys (see Config.AllowEviction) and, on a Cluster, whether sharded
// pub/sub is available; ctx bounds that. It adds a hook to client (on a
// Cluster, to each node's client) that notes connections to servers not
// seen before, so that the eviction policy is read again after a failover.
// The dlock options set the Locker's defaults. Like every backend's
// constructor over a client the caller made, it takes the client first,
// the backend's Config, then dlock's options.
//
// For the caller's context to bound every call, create the client with
// ContextTimeoutEnabled: true (Open does).
func New(ctx context.Context, client goredis.UniversalClient, cfg Config, opts ...dlock.Option) (*dlock.Locker, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: redis: nil client", dlock.ErrInvalidOption)
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return nil, fmt.Errorf("%w: redis: %v", dlock.ErrInvalidOption, err)
	}
	d, err := newDriver(ctx, client, cfg, false)
	if err != nil {
		return nil, err
	}
	return lockerOver(d, opts)
}

// lockerOver wraps d in the portable Locker, closing d if that fails.
func lockerOver(d *redisDriver, opts []dlock.Option) (*dlock.Locker, error) {
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// maxInFlight bounds the acquire attempts of one Locker that may be
// waiting for a pooled connection or a reply at once (see package gate).
// Renewals share the client's pool with them: a burst of 5,000 Locks on
// one Locker made a 3s hold's renewal wait for a connection until its
// window had run out, and the hold was given up (TestBurstKeepsHolds).
// Releases are not held back: the portable layer stops renewing a hold
// before it releases it, so a release that waited for a turn behind a
// burst could find its hold run out.
const maxInFlight = gate.Acquires

// redisDriver is the driver.Locker over one go-redis client.
type redisDriver struct {
	client    goredis.UniversalClient
	ownClient bool // opened from a URL: Close closes it
	cfg       Config
	publish   string // redislua.Publish or redislua.ShardedPublish
	subs      *subscriptions
	policy    *policyWatch // when to read maxmemory-policy again
	// inbox names this Locker's own channel of each key
	// ({...}:release:inbox), on which its queued waiter is woken: a
	// release wakes one process, not every one subscribed to the key.
	inbox string
	site  *redislua.QueueSite // publish, inbox and releaseMessage, boxed once for the queue's calls
	// heard says a release can tell whether a queued waiter hears of it:
	// the waiters subscribe on the server that runs the release (see
	// canTell), so it grants to, or wakes, only a waiter that does.
	heard bool

	bg       context.Context // background cleanups; cancelled by Close
	bgCancel context.CancelFunc
	bgMu     sync.Mutex // guards bgDone and bgWG.Add against Close
	bgDone   bool
	bgWG     sync.WaitGroup

	closeOnce sync.Once
	closed    chan struct{}
	ops       gate.Gate // acquire attempts in flight
}

var (
	_ driver.Locker    = (*redisDriver)(nil)
	_ driver.Acquirer  = (*redisDriver)(nil)
	_ driver.Inspector = (*redisDriver)(nil)
	_ driver.Limiter   = (*redisDriver)(nil)
)

// MaxTTL is the longest lease this backend grants: dlock.MaxTTL, 10
// years. Redis itself goes further: PX takes int64 milliseconds, and the
// scripts' deadlines (server time in ms plus the lease, Lua doubles that
// a script writes with 14 significant digits) stay exact until the year
// 5138. What binds is the client's arithmetic on a time.Duration (the
// lease rounded up to whole milliseconds overflows near 292 years and
// wrapped round to a 1ms lease), which dlock.MaxTTL keeps far from.
const MaxTTL = dlock.MaxTTL

// Limits reports the longest lease, MaxTTL.
func (d *redisDriver) Limits() driver.Limits { return driver.Limits{MaxTTL: MaxTTL} }

func newDriver(ctx context.Context, client goredis.UniversalClient, cfg Config, own bool) (*redisDriver, error) {
	switch client.(type) {
	case *goredis.Client, *goredis.ClusterClient:
	default:
		return nil, fmt.Errorf("%w: redis: unsupported client %T (use a *redis.Client, a failover *redis.Client or a *redis.ClusterClient)",
			dlock.ErrInvalidOption, client)
	}
	info, err := inspect(ctx, client)
	if err != nil {
		return nil, err
	}
	if err := info.checkEviction(cfg.AllowEviction); err != nil {
		return nil, err
	}
	d := &redisDriver{
		client:    client,
		ownClient: own,
		cfg:       cfg,
		publish:   redislua.Publish,
		policy:    newPolicyWatch(info),
		inbox:     newInbox(),
		closed:    make(chan struct{}),
		ops:       gate.New(maxInFlight),
	}
	d.policy.watchDials(ctx, client)
	cluster, _ := client.(*goredis.ClusterClient)
	sharded := cluster != nil && info.shardedPubSub
	if sharded {
		d.publish = redislua.ShardedPublish
	} else {
		cluster = nil // classic pub/sub: one connection hears every node
	}
	d.site = redislua.NewQueueSite(d.publish, d.inbox, releaseMessage)
	d.subs = newSubscriptions(client, cluster)
	d.heard = canTell(client, sharded)
	d.bg, d.bgCancel = context.WithCancel(context.Background())
	return d, nil
}

// canTell reports whether a release script can count the subscribers of
// a waiter's inbox channel: whether the Lockers' subscriptions are on the
// server the script runs on. They are on a standalone server and on
// Sentinel's primary (the failover client subscribes there; a failover
// breaks the subscription, which is made again on the new primary), and
// with sharded pub/sub on the master of the key's slot, unless the
// Cluster client subscribes on replicas (ReadOnly, RouteByLatency,
// RouteRandomly). Classic pub/sub on a Cluster reaches every node, but
// PUBLISH counts only the receivers connected to the one it runs on.
func canTell(client goredis.UniversalClient, sharded bool) bool {
	switch c := client.(type) {
	case *goredis.Client:
		return true
	case *goredis.ClusterClient:
		return sharded && !c.Options().ReadOnly
	}
	return false
}

// newInbox returns a random inbox name (16 hex digits).
func newInbox() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// state is what a Hold carries between TryAcquire, Renew and Release.
type state struct {
	ttlMs int64
	// calls is what the queue and release calls of this hold repeat,
	// boxed once: the key names (calls.Lock, calls.Channel) and the owner
	// (calls.Owner) are kept there only.
	calls redislua.QueueHold
	// tried counts the attempts made for owner; the last one's ID (tried in
	// base 36) is in the queue entry it refreshed, and in a grant that
	// counts from that refresh. One goroutine attempts at a time.
	tried uint64
}

// nextAttempt returns the ID of st's next attempt.
func (st *state) nextAttempt() string {
	st.tried++
	return strconv.FormatUint(st.tried, 36)
}

func (d *redisDriver) check(ctx context.Context) error {
	select {
	case <-d.closed:
		return driver.ErrClosed
	default:
	}
	return ctx.Err()
}

// TryAcquire makes one attempt, in turn: the lock is granted only when it
// is free and nobody live is queued for it. It never joins the queue.
func (d *redisDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	return d.attempt(ctx, d.newState(req), req.Meta, false)
}

func (d *redisDriver) newState(req driver.Request) *state {
	st := &state{ttlMs: redislua.Millis(req.TTL)}
	st.calls.Set(d.site, keyNames(d.cfg.Prefix, req.Key).queueKeys(), req.Owner, st.ttlMs)
	return st
}

// Acquire waits in the key's queue on the server (queue.lua): each attempt
// that is not granted the lock, once the waiter's inbox is subscribed (so
// after the first refusal, unless a wait on the key a moment ago left it
// subscribed), joins the queue, or refreshes the entry's deadline, one
// lease from now. A release hands the lock to the first
// waiter in line and tells it so, with its token, by a message addressed to
// its owner on the key's release channel (release.lua); the others sleep
// until their turn, or until the first waiter's entry would run out (a
// waiter that died), or until their own entry needs a refresh (every
// TTL/3). A waiter that misses the message finds the lock its own at its
// next attempt. A wait that ends without the lock (ctx, Close, an error)
// removes its entry, or releases a lock granted meanwhile, before it
// returns (and, if the server cannot be reached, in the background; the
// entry runs out by itself within a lease anyway).
//
// The validity window of a hold taken by an attempt starts when that
// attempt was sent; one that finds the lock its own already (a grant whose
// message it missed) ends when the lease it read there does. A grant sets
// a whole lease when the release runs, names the attempt whose refresh of
// the entry came last before it, and says how long after that refresh it
// ran, by the server's clock: when it names the waiter's last refused
// attempt, the window starts when that attempt was sent plus that time
// (see grantedSince); a grant naming an earlier one, or heard after its
// window, is followed by another attempt instead.
func (d *redisDriver) Acquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	st := d.newState(req)
	refresh := max(driver.RenewInterval(time.Duration(st.ttlMs)*time.Millisecond), time.Millisecond)
	// A channel still subscribed (a key contended a moment ago) is joined
	// before the first attempt: no release after it can be missed, and no
	// SUBSCRIBE is needed.
	channel := ""
	var w *watch
	if d.subs.subscribed() {
		channel = redislua.InboxChannel(st.calls.Channel(), d.inbox)
		w = d.subs.joinLive(ctx, channel, st.calls.Owner())
	}
	var (
		queued bool // an attempt queued st.calls.Owner()
		timer  *time.Timer
	)
	defer func() {
		if w != nil {
			_ = w.Close()
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	giveUp := func(err error) (driver.Hold, error) {
		if queued {
			d.leave(ctx, st)
			if ctx.Err() != nil {
				return driver.Hold{}, fmt.Errorf("%w: %w", driver.ErrNotAcquired, ctx.Err())
			}
		}
		return driver.Hold{}, err
	}
	var (
		since    time.Time // when the last refused attempt was sent
		sinceTry string    // and its ID
	)
	for {
		sent := time.Now()
		// Join the queue only once the inbox is subscribed: a release
		// grants the lock to the first waiter in line and tells it by a
		// message. Granted while its subscription was still being made,
		// a waiter would learn of the hold only at its next attempt, with
		// much of the lease gone (on a slow link, too little to renew).
		join := w != nil
		h, err := d.attempt(ctx, st, req.Meta, join)
		if err == nil {
			return h, nil
		}
		var held *driver.HeldError
		if !errors.As(err, &held) {
			// A reply lost on the way is undone by attempt (which also
			// removes the entry); a later one leaves the queue here.
			return giveUp(err)
		}
		queued = queued || join
		since, sinceTry = sent, strconv.FormatUint(st.tried, 36)
		if w == nil {
			if channel == "" {
				channel = redislua.InboxChannel(st.calls.Channel(), d.inbox)
			}
			if w, err = d.subs.watch(ctx, channel, st.calls.Owner(), true); err != nil {
				w = nil
				if !errors.Is(err, driver.ErrClosed) {
					err = d.mapErr(err)
				}
				return giveUp(err)
			}
			continue // again, now that no wake-up can be missed
		}
		wait := min(held.Remaining+time.Millisecond, refresh)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case _, ok := <-w.Changed():
			if !ok { // the subscription broke: make a new one
				_ = w.Close()
				w = nil
				continue
			}
			// A grant counts from the refresh of the attempt it names.
			// One that names an earlier attempt came late (the waiter was
			// paused, say): its lease may have run out and the lock be
			// someone else's since, so the next attempt finds out.
			// A grant heard after its window had ended (the waiter was
			// paused) is not a hold either; the next attempt finds the
			// lock still this owner's, with what is left of its lease, or
			// someone else's.
			if token, elapsed, attempt := w.granted(); token != 0 && attempt == sinceTry {
				ttl := time.Duration(st.ttlMs) * time.Millisecond
				if from := grantedSince(since, elapsed); time.Since(from) < ttl-driver.DriftAllowance(ttl) {
					return d.granted(ctx, st, token, from)
				}
			}
		case <-timer.C:
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-d.closed:
			return giveUp(driver.ErrClosed)
		}
	}
}

// grantedSince is when the validity window of a granted hold starts: when
// the waiter's last refused attempt was sent (it ran on the server after
// that), plus the server time that passed from then to the grant, less the
// clock-rate allowance dlock makes for a lease (1%) and a millisecond for
// the server's rounding to whole ms. Never later than now.
func grantedSince(since time.Time, elapsed time.Duration) time.Time {
	credit := elapsed - elapsed/100 - time.Millisecond
	if credit <= 0 {
		return since
	}
	return minTime(since.Add(credit), time.Now())
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// granted returns the hold a release handed to st with token.
func (d *redisDriver) granted(ctx context.Context, st *state, token uint64, since time.Time) (driver.Hold, error) {
	if err := d.recheck(ctx); err != nil {
		d.leave(ctx, st)
		return driver.Hold{}, err
	}
	return driver.Hold{Token: token, TTL: time.Duration(st.ttlMs) * time.Millisecond, Since: since, State: st}, nil
}

// leaveTimeout bounds the removal of a queue entry when a wait ends.
const leaveTimeout = time.Second

// leave removes st's queue entry (and a hold an ambiguous attempt may have
// taken), waking the next waiter if that frees the key for it. When the
// server cannot be reached now, a background cleanup tries again.
func (d *redisDriver) leave(ctx context.Context, st *state) {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), leaveTimeout)
	defer cancel()
	if err := d.release(lctx, st); err != nil && err != errReleased {
		d.cleanup(st)
	}
}

// attempt runs queue.lua once for st: join says whether an owner that is
// not granted the lock joins (or stays in) the queue.
func (d *redisDriver) attempt(ctx context.Context, st *state, meta string, join bool) (driver.Hold, error) {
	turn, err := d.ops.Enter(ctx, d.closed)
	if err != nil {
		return driver.Hold{}, err
	}
	call := redislua.QueueCall(&st.calls, meta, join, st.nextAttempt())
	sent := time.Now()
	v, acks, err := d.run(ctx, call)
	turn.Leave()
	if err != nil {
		if !serverError(err) {
			// The script may have run and the reply been lost: undo it.
			d.cleanup(st)
		}
		return driver.Hold{}, d.mapErr(err)
	}
	r, err := redislua.ParseAcquire(v)
	if err != nil {
		d.cleanup(st)
		return driver.Hold{}, err
	}
	if !r.Acquired {
		// PTTL rounds down; never report 0 ("unknown") for a lease that
		// is about to end.
		return driver.Hold{}, &driver.HeldError{Remaining: max(r.Remaining, time.Millisecond)}
	}
	if d.cfg.WaitReplicas > 0 && acks < int64(d.cfg.WaitReplicas) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = d.release(rctx, st)
		return driver.Hold{}, d.replicaErr(acks)
	}
	// After the acquire, so that a connection it dialled (to a master
	// new since the last check) is looked at before the hold is handed
	// out.
	if err := d.recheck(ctx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_ = d.release(rctx, st)
		return driver.Hold{}, err
	}
	ttl := time.Duration(st.ttlMs) * time.Millisecond
	h := driver.Hold{Token: r.Token, TTL: ttl, Since: sent, State: st}
	if r.Existing {
		// The lease was set before the script ran (which was after sent)
		// and had r.Remaining left then, less up to a ms of rounding.
		h.Since = sent.Add(r.Remaining - time.Millisecond - ttl)
	}
	return h, nil
}

func (d *redisDriver) replicaErr(acks int64) error {
	return driver.Unavailable(fmt.Errorf("%w: %d of %d within %v", ErrReplicas, max(acks, 0), d.cfg.WaitReplicas, d.cfg.WaitTimeout))
}

// run sends call, and with WaitReplicas set, WAITs on the same connection
// afterwards and returns the number of replicas that acknowledged (-1 when
// WAIT is off).
func (d *redisDriver) run(ctx context.Context, call redislua.Call) (any, int64, error) {
	if d.cfg.WaitReplicas <= 0 {
		v, err := call.Run(ctx, d.client).Result()
		return v, -1, err
	}
	var node *goredis.Client
	switch c := d.client.(type) {
	case *goredis.ClusterClient:
		n, err := c.MasterForKey(ctx, call.Keys()[0].(string))
		if err != nil {
			return nil, 0, err
		}
		node = n
	case *goredis.Client:
		node = c
	}
	// WAIT counts the writes of its own connection: keep one.
	conn := node.Conn()
	defer conn.Close()
	v, err := call.Run(ctx, conn).Result()
	if err != nil {
		return nil, 0, err
	}
	timeout := d.cfg.WaitTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	acks, err := conn.Wait(ctx, d.cfg.WaitReplicas, timeout).Result()
	if err != nil {
		// The write happened; only its replication is unknown.
		return v, 0, nil
	}
	return v, acks, nil
}

// cleanup releases st in the background, for an acquire whose outcome is
// unknown. The release is guarded by the owner: it never frees someone
// else's lock.
func (d *redisDriver) cleanup(st *state) {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	if d.bgDone {
		return // closing: the lease, if any, runs out by itself
	}
	d.bgWG.Add(1)
	go func() {
		defer d.bgWG.Done()
		ctx, cancel := context.WithTimeout(d.bg, cleanupTimeout)
		defer cancel()
		// A stalled server may run the lost request after this release
		// (it serves connections in no particular order): look again a
		// little later, until something was released or time is up.
		for _, wait := range cleanupRetries {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			if d.release(ctx, st) == nil {
				return
			}
		}
	}()
}

// cleanupRetries are the pauses before each release attempt of a cleanup.
var cleanupRetries = []time.Duration{0, 100 * time.Millisecond, time.Second}

func stateOf(h driver.Hold) (*state, error) {
	st, ok := h.State.(*state)
	if !ok || st == nil {
		return nil, fmt.Errorf("redis: hold not made by this backend: %w", driver.ErrNotHeld)
	}
	return st, nil
}

func (d *redisDriver) Release(ctx context.Context, h driver.Hold) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	st, err := stateOf(h)
	if err != nil {
		return err
	}
	err = d.release(ctx, st)
	if err == errReleased {
		return d.notHeld(ctx, st)
	}
	return err
}

func (d *redisDriver) release(ctx context.Context, st *state) error {
	// With WaitReplicas, a waiter takes the lock itself, so that its own
	// acquire is the write it waits on. Where the server can tell, a
	// waiter nobody hears (its process is gone) is skipped.
	call := redislua.ReleaseQueueCall(&st.calls, d.cfg.WaitReplicas <= 0, d.heard)
	v, err := call.Run(ctx, d.client).Result()
	if err != nil {
		return d.mapErr(err)
	}
	ok, err := redislua.ParseFlag(v)
	if err != nil {
		return err
	}
	if !ok {
		return errReleased
	}
	return nil
}

// errReleased is release's answer when the lock was not the owner's.
var errReleased = fmt.Errorf("redis: lock expired or taken over: %w", driver.ErrNotHeld)

func (d *redisDriver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	st, err := stateOf(h)
	if err != nil {
		return 0, err
	}
	keys, args := redislua.RenewArgs(st.calls.Lock(), st.calls.Owner(), st.ttlMs)
	v, acks, err := d.run(ctx, redislua.ScriptCall(redislua.Renew, keys, args))
	if err != nil {
		return 0, d.mapErr(err)
	}
	ok, err := redislua.ParseFlag(v)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, d.notHeld(ctx, st)
	}
	if d.cfg.WaitReplicas > 0 && acks < int64(d.cfg.WaitReplicas) {
		// Not lost, but a failover now could shorten the lease: report a
		// transient failure; the watchdog retries and gives up in time.
		return 0, d.replicaErr(acks)
	}
	return time.Duration(st.ttlMs) * time.Millisecond, nil
}

func (d *redisDriver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	w, err := d.subs.watch(ctx, keyNames(d.cfg.Prefix, key).channel, "", false)
	if err != nil {
		if errors.Is(err, driver.ErrClosed) {
			return nil, err
		}
		return nil, d.mapErr(err)
	}
	return w, nil
}

func (d *redisDriver) Close() error {
	var err error
	d.closeOnce.Do(func() {
		close(d.closed)
		d.subs.close()
		d.bgMu.Lock()
		d.bgDone = true
		d.bgMu.Unlock()
		d.bgCancel()
		d.bgWG.Wait()
		if d.ownClient {
			err = d.client.Close()
		}
	})
	return err
}

// Inspect reads key's lock, counter and metadata in one script, changing
// nothing.
func (d *redisDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	return d.inspect(ctx, key, false)
}

// Break deletes key's lock (and its metadata) whoever holds it, keeping the
// fencing counter, and announces the release to waiters. The holder's next
// renewal finds the lock gone.
func (d *redisDriver) Break(ctx context.Context, key string) (driver.Info, error) {
	return d.inspect(ctx, key, true)
}

func (d *redisDriver) inspect(ctx context.Context, key string, brk bool) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	n := keyNames(d.cfg.Prefix, key)
	keys, args := redislua.InspectQueueArgs(n.queueKeys(), brk, d.publish, releaseMessage)
	v, err := redislua.Inspect.Run(ctx, d.client, keys, args...).Result()
	if err != nil {
		return driver.Info{}, mapErr(err)
	}
	r, err := redislua.ParseInspect(v)
	if err != nil {
		return driver.Info{}, err
	}
	if !r.Held {
		return driver.Info{Waiters: r.Waiters}, nil
	}
	return driver.Info{Held: true, Token: r.Counter, Remaining: r.Remaining, Meta: r.Meta, Waiters: r.Waiters}, nil
}
