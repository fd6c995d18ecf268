package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
)

// Environment of a worker process.
const (
	envWorker   = "DLOCK_FAULT_WORKER"   // worker number; its presence makes the process a worker
	envURL      = "DLOCK_FAULT_URL"      // backend URL
	envKey      = "DLOCK_FAULT_KEY"      // lock key
	envTTL      = "DLOCK_FAULT_TTL"      // lease
	envResource = "DLOCK_FAULT_RESOURCE" // resource base URL
	envHold     = "DLOCK_FAULT_HOLD"     // fixed sleep between read and write; random 0-200ms if empty
	envSelfStop = "DLOCK_FAULT_SELFSTOP" // stop (SIGSTOP) itself after its first read
	envPermits  = "DLOCK_FAULT_PERMITS"  // > 0: hold a permit of a semaphore of that many instead of the lock
	envElect    = "DLOCK_FAULT_ELECT"    // campaign in an election on the key instead of locking it
	envReaders  = "DLOCK_FAULT_READERS"  // > 0: a read-write lock of that many readers instead of the lock
	envReader   = "DLOCK_FAULT_READER"   // with envReaders: hold it as a reader (reads only)
	envHolds    = "DLOCK_FAULT_HOLDS"    // > 0: hold that many keys on one Locker (manyholds.go)
	envTaker    = "DLOCK_FAULT_TAKER"    // with envHolds: take over a sample of those keys instead
	envSpread   = "DLOCK_FAULT_SPREAD"   // with envHolds: the holds' TTLs run from TTL to TTL plus this
)

// WorkerConfig describes one worker process.
type WorkerConfig struct {
	ID       int
	URL      string
	Key      string
	TTL      time.Duration
	Resource string
	Hold     time.Duration // 0: random 0-200ms
	// SelfStop makes the worker SIGSTOP itself right after its first
	// accepted read, so a pause lands inside a hold every time, however
	// slow the machine is to react; the test resumes it.
	SelfStop bool
	// Permits, when above 0, makes the worker hold one permit of a
	// semaphore of that many on Key instead of the lock Key: every
	// operation then names the permit's key, which the resource fences
	// and counts on its own.
	Permits int
	// Elect makes the worker a candidate in a dlock.Election named Key:
	// Campaign instead of Lock, the term as the token, Unlock instead of
	// Unlock. The rest of the loop is the same.
	Elect bool
	// Readers, when above 0, makes the worker hold a dlock.RWMutex of
	// that many readers on Key instead of the lock: as its writer, or with
	// Reader as a reader, which only reads. Its operations carry the role,
	// and the resource fences reads and writes apart (Resource.apply).
	Readers int
	Reader  bool
	// Holds, when above 0, makes the worker hold that many keys under
	// Key on one Locker and report when each hold's Done closed, instead
	// of the loop (manyholds.go); with Taker, it takes over a sample of
	// those keys once told to, from a Locker of its own.
	Holds  int
	Taker  bool
	Spread time.Duration // the holds' TTLs run from TTL to TTL+Spread (holdTTL)
}

func (c WorkerConfig) env() []string {
	env := []string{
		envWorker + "=" + strconv.Itoa(c.ID),
		envURL + "=" + c.URL,
		envKey + "=" + c.Key,
		envTTL + "=" + c.TTL.String(),
		envResource + "=" + c.Resource,
	}
	if c.Hold > 0 {
		env = append(env, envHold+"="+c.Hold.String())
	}
	if c.SelfStop {
		env = append(env, envSelfStop+"=1")
	}
	if c.Permits > 0 {
		env = append(env, envPermits+"="+strconv.Itoa(c.Permits))
	}
	if c.Elect {
		env = append(env, envElect+"=1")
	}
	if c.Readers > 0 {
		env = append(env, envReaders+"="+strconv.Itoa(c.Readers))
	}
	if c.Reader {
		env = append(env, envReader+"=1")
	}
	if c.Holds > 0 {
		env = append(env, envHolds+"="+strconv.Itoa(c.Holds))
	}
	if c.Taker {
		env = append(env, envTaker+"=1")
	}
	if c.Spread > 0 {
		env = append(env, envSpread+"="+c.Spread.String())
	}
	return env
}

// MaybeWorker runs the worker loop and exits if this process was started as
// a worker; otherwise it returns at once. Call it first in TestMain.
func MaybeWorker() {
	if os.Getenv(envWorker) == "" {
		return
	}
	id, _ := strconv.Atoi(os.Getenv(envWorker))
	ttl, _ := time.ParseDuration(os.Getenv(envTTL))
	hold, _ := time.ParseDuration(os.Getenv(envHold))
	permits, _ := strconv.Atoi(os.Getenv(envPermits))
	holds, _ := strconv.Atoi(os.Getenv(envHolds))
	readers, _ := strconv.Atoi(os.Getenv(envReaders))
	spread, _ := time.ParseDuration(os.Getenv(envSpread))
	cfg := WorkerConfig{ID: id, URL: os.Getenv(envURL), Key: os.Getenv(envKey), TTL: ttl,
		Resource: os.Getenv(envResource), Hold: hold, SelfStop: os.Getenv(envSelfStop) == "1", Permits: permits,
		Elect: os.Getenv(envElect) == "1", Readers: readers, Reader: os.Getenv(envReader) == "1", Holds: holds, Taker: os.Getenv(envTaker) == "1", Spread: spread}
	go exitWhenOrphaned(os.Getppid())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := runWorker(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: %v\n", id, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// exitWhenOrphaned ends the worker once the test process that started it
// is gone without stopping it (killed, or dead of a closed output pipe):
// an orphaned worker went on contending for its key, and loading the
// machine for every later run, until someone killed it by hand.
func exitWhenOrphaned(parent int) {
	for range time.Tick(200 * time.Millisecond) {
		if os.Getppid() != parent {
			os.Exit(3)
		}
	}
}

type workerClient struct {
	cfg  WorkerConfig
	http *http.Client
	key  string // the permit's key while one is held (Permits > 0)
}

func (c *workerClient) post(path string, body, reply any) error {
	b, _ := json.Marshal(body)
	resp, err := c.http.Post(c.cfg.Resource+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("resource: %s", resp.Status)
	}
	if reply != nil {
		return json.NewDecoder(resp.Body).Decode(reply)
	}
	return nil
}

func (c *workerClient) event(e Event) {
	e.Worker = c.cfg.ID
	if e.Key == "" {
		e.Key = c.key
	}
	if e.Mono == 0 {
		e.Mono = Mono()
	}
	_ = c.post("/event", e, nil)
}

// op reads or writes through the resource, carrying the token and the
// lease's current deadline.
func (c *workerClient) op(kind string, m holder, token dlock.Token, value int64) (opReply, error) {
	var expires int64
	if l := m.Lease(); l.Token == token {
		expires = MonoAt(l.Expires)
	}
	var reply opReply
	err := c.post("/op", opRequest{Worker: c.cfg.ID, Kind: kind, Key: c.key, Role: c.cfg.role(), Token: uint64(token), Value: value, Expires: expires}, &reply)
	return reply, err
}

// runWorker loops acquire → read → sleep → write → release until ctx ends.
// It deliberately does not look at Done between the read and the write: it
// models a holder paused between checking its lock and acting, which is
// what fencing exists for.
func runWorker(ctx context.Context, cfg WorkerConfig) error {
	// A fresh connection per operation: a keep-alive connection can go
	// stale while the worker is paused.
	c := &workerClient{cfg: cfg, http: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}}
	if cfg.Holds > 0 {
		return runManyHolds(ctx, c)
	}
	locker, err := dlock.Open(ctx, cfg.URL)
	if err != nil {
		return err
	}
	defer locker.Close()
	m, err := newHolder(locker, cfg)
	if err != nil {
		return err
	}
	c.event(Event{Kind: EvReady})
	for ctx.Err() == nil {
		if err := m.Lock(ctx); err != nil {
			if ctx.Err() == nil {
				c.event(Event{Kind: EvError, Err: "lock: " + err.Error()})
				sleepCtx(ctx, 20*time.Millisecond+rand.N(30*time.Millisecond))
			}
			continue
		}
		token := m.Token()
		lease := m.Lease()
		c.key = permitKey(m)
		if cfg.Reader {
			c.key = readersKey
		}
		c.event(Event{Kind: EvAcquire, Token: uint64(token), Expires: MonoAt(lease.Expires)})
		lost := watchLoss(m, token)

		r, err := c.op(EvRead, m, token, 0)
		if err != nil {
			c.event(Event{Kind: EvError, Token: uint64(token), Err: "read: " + err.Error()})
		}
		if err == nil && !r.Rejected && cfg.Reader {
			hold := cfg.Hold
			if hold == 0 {
				hold = rand.N(200 * time.Millisecond)
			}
			time.Sleep(hold) // a reader only reads, and holds a while
		} else if err == nil && !r.Rejected {
			if cfg.SelfStop {
				cfg.SelfStop = false
				_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
			}
			hold := cfg.Hold
			if hold == 0 {
				hold = rand.N(200 * time.Millisecond)
			}
			time.Sleep(hold) // not ctx-aware on purpose: a paused holder finishes its step
			if _, err := c.op(EvWrite, m, token, r.Value+1); err != nil {
				c.event(Event{Kind: EvError, Token: uint64(token), Err: "write: " + err.Error()})
			}
		}

		// The hold ends, as far as this worker acts, when it starts to
		// unlock: the next holder may acquire before Unlock returns, also
		// when Unlock then fails (it may have released on some servers
		// before it gave up, and the lock is free or runs out there).
		unlocking := Mono()
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = m.Unlock(uctx)
		cancel()
		switch {
		case err == nil:
			c.event(Event{Kind: EvRelease, Token: uint64(token), Mono: unlocking})
		case errors.Is(err, dlock.ErrLockLost):
			l := <-lost
			c.event(Event{Kind: EvLost, Token: uint64(token), Mono: l.at, Expires: l.expires, Err: err.Error()})
		default:
			c.event(Event{Kind: EvError, Token: uint64(token), Mono: unlocking, Err: "unlock: " + err.Error()})
		}
		c.key = ""
	}
	return nil
}

// holder is what a worker holds: the lock, a permit of a semaphore, or an
// election's leadership, all of the one hold shape.
type holder = dlock.Lockable

func newHolder(l *dlock.Locker, cfg WorkerConfig) (holder, error) {
	if cfg.Elect {
		return l.NewElection(cfg.Key, dlock.WithTTL(cfg.TTL), dlock.WithOwner(fmt.Sprintf("worker %d", cfg.ID)))
	}
	if cfg.Permits > 0 {
		return l.NewSemaphore(cfg.Key, cfg.Permits, dlock.WithTTL(cfg.TTL))
	}
	if cfg.Readers > 0 {
		rw, err := l.NewRWMutex(cfg.Key, cfg.Readers, dlock.WithTTL(cfg.TTL))
		if err != nil || !cfg.Reader {
			return rw, err
		}
		return rw.RLocker(), nil
	}
	return l.NewMutex(cfg.Key, dlock.WithTTL(cfg.TTL))
}

// readersKey is the key a reader's events and operations name in a
// read-write run, so that its holds are checked apart from the writers'
// (the writers' name ""). It reads the one counter.
const readersKey = "readers"

// role is the worker's role in a read-write run: "r" for a reader, "w"
// for a writer; "" outside one.
func (c WorkerConfig) role() string {
	switch {
	case c.Readers == 0:
		return ""
	case c.Reader:
		return "r"
	}
	return "w"
}

// permitKey is the key of the permit h holds; "" for a lock.
func permitKey(h holder) string {
	if s, ok := h.(*dlock.Semaphore); ok {
		return s.PermitKey()
	}
	return ""
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

type loss struct {
	at      int64 // when Done closed
	expires int64 // the validity deadline last seen before that
}

// watchLoss samples the hold's validity deadline (renewals move it) until
// Done closes, and then reports when that was and the last deadline seen.
func watchLoss(m holder, token dlock.Token) <-chan loss {
	out := make(chan loss, 1)
	done := m.Done()
	go func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		var expires int64
		sample := func() {
			if l := m.Lease(); l.Token == token {
				expires = MonoAt(l.Expires)
			}
		}
		sample()
		for {
			select {
			case <-done:
				out <- loss{at: Mono(), expires: expires}
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	return out
}
