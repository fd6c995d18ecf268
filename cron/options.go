package dlockcron

import (
	"context"

	"github.com/dlock-go/dlock"
	"github.com/robfig/cron/v3"
)

// Option configures Once.
type Option func(*options)

type options struct {
	logger   cron.Logger
	onSkip   func(key string)
	onError  func(t Tick, err error)
	lockOpts []dlock.Option
	base     context.Context
}

func defaultOptions() options {
	return options{logger: cron.DefaultLogger, base: context.Background()}
}

// WithLogger sets the cron.Logger that skipped ticks are logged to (at
// Info, "skip") and failed ticks (at Error, "job failed" or "lock
// failed"), as cron's own wrappers do. By default cron.DefaultLogger,
// which prints errors only; give the Cron's logger to see the skips too.
func WithLogger(l cron.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// OnSkip has Once call fn each time a tick is skipped because the key was
// held elsewhere: by another instance running this tick, or, within the
// minimum hold, by the instance that already ran it. A skip is the normal
// outcome on every instance but one. Like OnError's, fn is called from
// the Cron's job goroutines, possibly from several at once.
func OnSkip(fn func(key string)) Option { return func(o *options) { o.onSkip = fn } }

// OnError has Once call fn with each tick's error: the job's (joined with
// the loss, matching dlock.ErrLockLost, when the hold was lost while the
// job ran) or the lock's when the key could not be tried (the backend did
// not answer: dlock.ErrUnavailable; the Locker was closed: dlock.ErrClosed;
// a bad key or option: dlock.ErrInvalidKey, dlock.ErrInvalidOption). Its
// Tick has a zero Token when the job did not run.
func OnError(fn func(t Tick, err error)) Option { return func(o *options) { o.onError = fn } }

// WithLockOptions passes options to the Mutex each tick takes (dlock.WithTTL,
// dlock.WithObserver, dlock.WithOwner, ...); the minimum hold is Once's own
// argument.
func WithLockOptions(opts ...dlock.Option) Option {
	return func(o *options) { o.lockOpts = append(o.lockOpts[:len(o.lockOpts):len(o.lockOpts)], opts...) }
}

// WithContext sets the context every tick's job context derives from
// (context.Background by default): ending it, at shutdown, cancels the
// jobs that run and has the ticks that come after it end with its error.
// Its values reach the job.
func WithContext(ctx context.Context) Option {
	return func(o *options) {
		if ctx != nil {
			o.base = ctx
		}
	}
}
