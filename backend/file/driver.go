package file

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// fileDriver is one Locker's access to a lock directory. Each one has its
// own file descriptors and its own inotify instance, so two of them in one
// process behave like two processes.
type fileDriver struct {
	dir string
	ops gate.Gate // acquire attempts at work (maxInFlight)

	closeOnce sync.Once
	closed    chan struct{}

	mu      sync.Mutex
	watcher *watcher              // started by the first Watch
	lines   map[string]*lineWatch // the waiting Locks' places in line, by key
}

var (
	_ driver.Locker      = (*fileDriver)(nil)
	_ driver.Inspector   = (*fileDriver)(nil)
	_ driver.Recorder    = (*fileDriver)(nil)
	_ driver.Limiter     = (*fileDriver)(nil)
	_ driver.LockWatcher = (*fileDriver)(nil)
)

// MaxTTL is the longest lease file:// grants: dlock.MaxTTL, 10 years. The
// lease's end is stored as wall-clock nanoseconds since 1970 in an int64,
// which ends in April 2262; a lease that ran past it would wrap around to
// one that ended long ago, and the key would read as free while held (a
// TTL of 291 years did that). A lease of 10 years ends within it when
// taken before 2252.
const MaxTTL = dlock.MaxTTL

// Limits reports the longest lease, MaxTTL.
func (d *fileDriver) Limits() driver.Limits { return driver.Limits{MaxTTL: MaxTTL} }

// maxInFlight bounds the acquire attempts of one Locker at work on the
// lock directory at once (see package gate). An attempt is a few system
// calls on the key's file, bound by CPU: a burst of 5,000 Locks through
// one Locker shared the cores among 5,000 of them, each took seconds, and
// their leases (counted from their writes) and the renewals of the holds
// already taken ran out meanwhile (TestBurstKeepsHolds). Renewals and
// releases take no turn: the portable layer stops renewing a hold before
// it releases it.
const maxInFlight = gate.Acquires

func newDriver(dir string) *fileDriver {
	return &fileDriver{dir: dir, ops: gate.New(maxInFlight), closed: make(chan struct{})}
}

// holdState is what a Hold carries between acquire and release.
type holdState struct {
	path  string
	owner string
	token uint64
}

func (d *fileDriver) path(key string) string { return filepath.Join(d.dir, fileName(key)) }

func (d *fileDriver) check(ctx context.Context) error {
	select {
	case <-d.closed:
		return driver.ErrClosed
	default:
	}
	return ctx.Err()
}

// checkKey refuses a state file that belongs to another key (two long keys
// whose SHA-256 collided).
func checkKey(path string, s *state, key string) error {
	if s.key != "" && s.key != key {
		return driver.Unavailable(fmt.Errorf("file: %s belongs to key %q, not %q (hash collision)", path, s.key, key))
	}
	return nil
}

func (d *fileDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if err := d.check(ctx); err != nil {
		return driver.Hold{}, err
	}
	turn, err := d.ops.Enter(ctx, d.closed)
	if err != nil {
		return driver.Hold{}, err
	}
	defer turn.Leave()
	path := d.path(req.Key)
	lw := d.line(req.Key) // nil unless a Lock of this Locker waits for the key
	var (
		token uint64
		since time.Time
	)
	err = update(ctx, path, true, func(s *state, now time.Time) (bool, error) {
		if err := checkKey(path, s, req.Key); err != nil {
			return false, err
		}
		if err := d.refuse(req.Key, lw, s, now, req.TTL); err != nil {
			return false, err
		}
		// Seeding from the clock keeps tokens increasing even when the
		// file was removed (or the whole directory wiped) meanwhile.
		s.token = max(s.token+1, uint64(now.UnixMicro()))
		s.expires = now.Add(req.TTL).UnixNano()
		s.owner = req.Owner
		s.meta = req.Meta
		s.key = req.Key
		token, since = s.token, now
		return true, nil
	})
	if err != nil {
		return driver.Hold{}, err
	}
	return driver.Hold{
		Token: token,
		TTL:   req.TTL,
		// The lease runs from the moment it was written: the wait for a
		// turn or for the flock before that does not shorten its window.
		Since: since,
		State: holdState{path: path, owner: req.Owner, token: token},
	}, nil
}

// ours checks that h is the live hold of its file.
func ours(h driver.Hold, s *state, now time.Time) error {
	hs := h.State.(holdState)
	switch {
	case s.owner != hs.owner || s.token != hs.token:
		return fmt.Errorf("file: %s is no longer this hold's: %w", hs.path, driver.ErrNotHeld)
	case !s.heldAt(now):
		return fmt.Errorf("file: lease in %s expired: %w", hs.path, driver.ErrNotHeld)
	}
	return nil
}

func holdOf(h driver.Hold) (holdState, error) {
	hs, ok := h.State.(holdState)
	if !ok {
		return hs, fmt.Errorf("file: foreign hold: %w", driver.ErrNotHeld)
	}
	return hs, nil
}

func (d *fileDriver) Release(ctx context.Context, h driver.Hold) error {
	if err := d.check(ctx); err != nil {
		return err
	}
	hs, err := holdOf(h)
	if err != nil {
		return err
	}
	err = update(ctx, hs.path, false, func(s *state, now time.Time) (bool, error) {
		if err := ours(h, s, now); err != nil {
			return false, err
		}
		s.owner, s.expires, s.meta = "", 0, ""
		return true, nil
	})
	if errors.Is(err, errNoFile) {
		return fmt.Errorf("file: %s was removed: %w", hs.path, driver.ErrNotHeld)
	}
	return err
}

func (d *fileDriver) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	if err := d.check(ctx); err != nil {
		return 0, err
	}
	hs, err := holdOf(h)
	if err != nil {
		return 0, err
	}
	err = extend(ctx, hs.path, func(s *state, now time.Time) error {
		if err := ours(h, s, now); err != nil {
			return err
		}
		s.expires = now.Add(h.TTL).UnixNano()
		return nil
	})
	if errors.Is(err, errNoFile) {
		return 0, fmt.Errorf("file: %s was removed: %w", hs.path, driver.ErrNotHeld)
	}
	if err != nil {
		return 0, err
	}
	return h.TTL, nil
}

func (d *fileDriver) Watch(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	w, err := d.inotify()
	if err != nil {
		return nil, err
	}
	return w.watch(d.path(key))
}

// inotify returns the driver's watcher, starting it if need be.
func (d *fileDriver) inotify() (*watcher, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watcher == nil {
		w, err := newWatcher()
		if err != nil {
			return nil, err
		}
		d.watcher = w
	}
	return d.watcher, nil
}

func (d *fileDriver) Close() error {
	d.closeOnce.Do(func() { close(d.closed) })
	d.mu.Lock()
	w := d.watcher
	d.watcher = nil
	d.mu.Unlock()
	if w != nil {
		return w.close()
	}
	return nil
}
