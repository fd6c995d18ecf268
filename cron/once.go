package dlockcron

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/robfig/cron/v3"
)

// Once returns a cron.JobWrapper that runs each tick of the job it wraps
// on one instance only, of all the instances that schedule it with a
// Locker on the same store and the same key.
//
// Each tick takes a Mutex on key with dlock.WithMinHold(minHold) and makes
// one attempt (TryLock). When the key is held elsewhere, the tick is
// skipped: logged at Info and given to OnSkip. When it is won, the job
// runs under the hold: a Job with a context cancelled when the hold is
// lost and the Tick with the fencing token, any other cron.Job through
// its Run. When the job returns, the hold is released, but the minimum
// hold keeps the key held on the store until minHold has passed from the
// acquisition, so the instances whose schedules fire later in the same
// period find it held and skip. A job that runs longer than minHold keeps
// the key until it returns (the hold is renewed meanwhile).
//
// minHold must be longer than the widest gap between the instances' runs
// of one tick (the skew of their clocks and schedules, plus a round trip
// to the store), so that the late instances find the key still held, and
// shorter than the shortest interval between two ticks less the jitter of
// a round trip, so that the next tick finds it free again: for a job every
// period P, P*9/10 tolerates gaps up to nearly P*9/10 and leaves P/10 for
// the jitter (see the package documentation). There is no default: the
// wrapper cannot see the schedule. minHold must be positive, and every
// instance should give the same. An invalid minHold, key or option, or a
// backend that cannot keep a key held past its release (see
// dlock.WithMinHold), makes every tick fail with an error matching
// dlock.ErrInvalidOption or dlock.ErrInvalidKey, reported to OnError and
// the logger.
//
// Each tick's Mutex is new, so ticks that overlap on one instance (a job
// longer than its period) are told apart as on two instances: the later
// one is skipped. The Locker's Close releases a hold that runs, with its
// minimum kept.
func Once(locker *dlock.Locker, key string, minHold time.Duration, opts ...Option) cron.JobWrapper {
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	w := &wrapper{locker: locker, key: key, minHold: minHold, o: o}
	return func(j cron.Job) cron.Job {
		job := contextJob(j)
		return cron.FuncJob(func() { w.tick(job) })
	}
}

// wrapper is one Once: what every tick of the jobs it wraps shares.
type wrapper struct {
	locker  *dlock.Locker
	key     string
	minHold time.Duration
	o       options
}

// tick runs one tick of job: the key tried once, the job under the hold,
// the outcome reported.
func (w *wrapper) tick(job Job) {
	t := Tick{Key: w.key, Start: time.Now()}
	m, err := w.mutex()
	if err == nil {
		err = dlock.Do(w.o.base, tryOnce{m}, func(ctx context.Context) error {
			t.Token = m.Token()
			return job(ctx, t)
		})
	}
	switch {
	case err == nil:
	case t.Token == 0 && errors.Is(err, dlock.ErrNotAcquired) && w.o.base.Err() == nil:
		w.o.logger.Info("skip", "key", w.key)
		if w.o.onSkip != nil {
			w.o.onSkip(w.key)
		}
	default:
		if t.Token == 0 {
			w.o.logger.Error(err, "lock failed", "key", w.key)
		} else {
			w.o.logger.Error(err, "job failed", "key", w.key, "token", uint64(t.Token))
		}
		if w.o.onError != nil {
			w.o.onError(t, err)
		}
	}
}

// mutex makes the tick's Mutex, with the minimum hold after the caller's
// lock options so that theirs cannot undo it.
func (w *wrapper) mutex() (*dlock.Mutex, error) {
	if w.locker == nil {
		return nil, fmt.Errorf("%w: dlockcron.Once needs a Locker", dlock.ErrInvalidOption)
	}
	if w.minHold <= 0 {
		return nil, fmt.Errorf("%w: dlockcron.Once needs a positive minimum hold, got %v", dlock.ErrInvalidOption, w.minHold)
	}
	opts := append(w.o.lockOpts[:len(w.o.lockOpts):len(w.o.lockOpts)], dlock.WithMinHold(w.minHold))
	return w.locker.NewMutex(w.key, opts...)
}

// tryOnce is a Mutex whose Lock makes one attempt, so that dlock.Do takes
// it as TryLock would and keeps everything else it does: the context
// cancelled on loss, the unlock on return and on panic.
type tryOnce struct{ *dlock.Mutex }

func (t tryOnce) Lock(ctx context.Context) error { return t.TryLock(ctx) }
