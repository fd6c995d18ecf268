package dlock

import (
	"context"
	"errors"
	"github.com/dlock-go/dlock/observe"
	"log/slog"
)

// WithLogger logs the life of holds to l, with structured attributes:
// ERROR for a lost hold (key, token, cause), WARN for a renewal that failed
// without losing the hold yet and for a hold ended at its maximum
// (WithMaxHold), DEBUG for acquisitions and releases. Without
// it dlock logs nothing: a library does not write to the global logger
// unless asked. It is an Observer like any other (see WithObserver).
func WithLogger(l *slog.Logger) Option {
	if l == nil {
		return func(*options) {}
	}
	return WithObserver(slogObserver{l})
}

type slogObserver struct{ l *slog.Logger }

func (s slogObserver) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }

func (s slogObserver) Step(context.Context, observe.Call, observe.Step) {}

func (s slogObserver) End(ctx context.Context, c observe.Call, r observe.Result) {
	switch {
	case (c.Op == observe.OpLock || c.Op == observe.OpTryLock) && r.Outcome == observe.OutcomeAcquired:
		s.l.LogAttrs(ctx, slog.LevelDebug, "dlock: acquired",
			slog.String("backend", c.Backend), slog.String("key", c.Key),
			slog.Uint64("token", r.Token), slog.Duration("wait", r.Duration),
			slog.Duration("ttl", r.TTL))
	case c.Op == observe.OpRenew && r.Outcome == observe.OutcomeFailed:
		s.l.LogAttrs(ctx, slog.LevelWarn, "dlock: renewal failed; retrying",
			slog.String("backend", c.Backend), slog.String("key", c.Key),
			slog.Uint64("token", r.Token), slog.Bool("watchdog", c.Watchdog),
			slog.Any("error", r.Err))
	}
}

func (s slogObserver) HoldEnd(e observe.HoldEnd) {
	if e.Lost && errors.Is(e.Cause, ErrMaxHoldReached) {
		s.l.LogAttrs(context.Background(), slog.LevelWarn, "dlock: maximum hold reached; released",
			slog.String("backend", e.Backend), slog.String("key", e.Key),
			slog.Uint64("token", e.Token), slog.Duration("held", e.Held))
		return
	}
	if e.Lost {
		s.l.LogAttrs(context.Background(), slog.LevelError, "dlock: lock lost",
			slog.String("backend", e.Backend), slog.String("key", e.Key),
			slog.Uint64("token", e.Token), slog.String("cause", observe.LossCause(e.Cause)),
			slog.Duration("held", e.Held), slog.Any("error", e.Cause))
		return
	}
	s.l.LogAttrs(context.Background(), slog.LevelDebug, "dlock: released",
		slog.String("backend", e.Backend), slog.String("key", e.Key),
		slog.Uint64("token", e.Token), slog.Duration("held", e.Held),
		slog.Any("reason", e.Cause))
}
