package dlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock/driver"
)

// Info is what the backend's server knows of a key (Locker.Inspect).
type Info struct {
	Key string
	// Held reports whether a lease on the key is live on the server.
	Held bool
	// Token is the holder's fencing token; 0 when free.
	Token Token
	// Remaining is how long the holder's lease still runs on the server;
	// 0 when free or when the backend cannot tell.
	Remaining time.Duration
	// Owner is the holder's description (WithOwner).
	Owner string
	// Waiters is how many requests wait in the backend's queue for the
	// key (etcd, ZooKeeper, Redis); -1 for a backend without a server-side queue.
	Waiters int
}

// WithOwner sets the description stored with each hold, which Inspect
// (and lockctl status) reports: who holds the key. The default names the
// host, the process ID and the program ("host=web-1 pid=4242
// prog=billing"). At most driver.MaxMetaLen bytes of valid UTF-8; anything
// else is an ErrInvalidOption error.
func WithOwner(desc string) Option { return func(o *options) { o.meta, o.metaSet = desc, true } }

// defaultOwner is the description of a hold when WithOwner is not given.
func defaultOwner() string {
	host, _ := os.Hostname()
	prog := filepath.Base(os.Args[0])
	s := "host=" + host + " pid=" + strconv.Itoa(os.Getpid()) + " prog=" + prog
	if len(s) > driver.MaxMetaLen {
		s = s[:driver.MaxMetaLen]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return s
}

func validOwner(s string) error {
	if len(s) > driver.MaxMetaLen {
		return fmt.Errorf("%w: owner description of %d bytes exceeds %d", ErrInvalidOption, len(s), driver.MaxMetaLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: owner description is not valid UTF-8", ErrInvalidOption)
	}
	return nil
}

// inspector returns the driver's Inspector, or an error for a driver that
// has none (every dlock backend has one).
func (l *Locker) inspector() (driver.Inspector, error) {
	if in, ok := l.drv.(driver.Inspector); ok {
		return in, nil
	}
	return nil, fmt.Errorf("dlock: backend %s cannot inspect keys: %w", l.defaults.backend, errors.ErrUnsupported)
}

// Inspect reports what the backend's server holds for key: whether it
// is held, the holder's token, the lease left on the server, the
// holder's description (WithOwner), and, on queue backends, how many
// wait. It changes nothing and takes no lock.
func (l *Locker) Inspect(ctx context.Context, key string) (Info, error) {
	return l.inspectOp(ctx, "inspect", key, func(in driver.Inspector) (driver.Info, error) { return in.Inspect(ctx, key) })
}

// Break removes whatever holds key, as an operator breaking a stuck
// lock would, and returns what it removed. The broken holder learns of
// it (its Done closes within its renewal interval: its next renewal
// finds the lock gone), and the next holder's token is higher than the
// broken one's, so a fence refuses the broken holder's late writes.
func (l *Locker) Break(ctx context.Context, key string) (Info, error) {
	return l.inspectOp(ctx, "break", key, func(in driver.Inspector) (driver.Info, error) { return in.Break(ctx, key) })
}

func (l *Locker) inspectOp(ctx context.Context, op, key string, call func(driver.Inspector) (driver.Info, error)) (Info, error) {
	if err := checkKey(key); err != nil {
		return Info{}, fmt.Errorf("dlock: %s %q: %w", op, key, err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("dlock: %s %q: %w", op, key, err)
	}
	if err := l.checkOpen(); err != nil {
		return Info{}, fmt.Errorf("dlock: %s %q: %w", op, key, err)
	}
	in, err := l.inspector()
	if err != nil {
		return Info{}, err
	}
	di, err := call(in)
	if err != nil {
		return Info{}, fmt.Errorf("dlock: %s %q: %w", op, key, classify(ctx, err, false))
	}
	return Info{Key: key, Held: di.Held, Token: Token(di.Token), Remaining: di.Remaining, Owner: di.Meta, Waiters: di.Waiters}, nil
}
