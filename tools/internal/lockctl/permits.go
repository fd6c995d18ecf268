package lockctl

import (
	"context"
	"flag"

	"github.com/dlock-go/dlock"
)

// holder is what lockctl run holds while COMMAND runs: a lock (a
// *dlock.Mutex), with --permits one permit of a semaphore, with --readers
// a read-write lock as its writer or (--read) a reader.
type holder interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context) error
	Unlock(ctx context.Context) error
	Token() dlock.Token
	Lease() dlock.Lease
	Done() <-chan struct{}
}

// A *dlock.Semaphore is a holder as it is: its Lock, TryLock and Unlock
// take and give back one permit.
var _ holder = (*dlock.Semaphore)(nil)

// newHolder makes the lock or, when permits > 0, the semaphore permit KEY
// names.
func newHolder(l *dlock.Locker, cfg runConfig, opts []dlock.Option) (holder, error) {
	if cfg.readers > 0 {
		rw, err := l.NewRWMutex(cfg.key, cfg.readers, opts...)
		if err != nil {
			return nil, err
		}
		if cfg.read {
			return rw.RLocker(), nil
		}
		return rw, nil
	}
	if cfg.permits > 0 {
		s, err := l.NewSemaphore(cfg.key, cfg.permits, opts...)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return l.NewMutex(cfg.key, opts...)
}

// permitKey is the key a fence checks DLOCK_TOKEN against: the permit's
// own key with --permits, else KEY.
func permitKey(h holding, key string) string {
	if p, ok := h.(*dlock.Semaphore); ok {
		return p.PermitKey()
	}
	return key
}

// permitsSet reports whether --permits was given (--permits 0 is refused,
// not taken for "a plain lock").
func permitsSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "permits" })
	return set
}
