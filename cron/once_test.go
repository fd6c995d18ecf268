package dlockcron_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	dlockcron "github.com/dlock-go/dlock/cron"
	"github.com/robfig/cron/v3"
)

// outcomes records what Once reported for the ticks of one instance.
type outcomes struct {
	mu     sync.Mutex
	skips  int
	errs   []error
	ticks  []dlockcron.Tick // the Ticks the job ran with
	errFor []dlockcron.Tick // the Ticks OnError was given
}

func (o *outcomes) options() []dlockcron.Option {
	return []dlockcron.Option{
		dlockcron.WithLogger(cron.DiscardLogger),
		dlockcron.OnSkip(func(string) { o.mu.Lock(); o.skips++; o.mu.Unlock() }),
		dlockcron.OnError(func(t dlockcron.Tick, err error) {
			o.mu.Lock()
			o.errs, o.errFor = append(o.errs, err), append(o.errFor, t)
			o.mu.Unlock()
		}),
	}
}

func (o *outcomes) job(fn func(ctx context.Context, t dlockcron.Tick) error) dlockcron.Job {
	return func(ctx context.Context, t dlockcron.Tick) error {
		o.mu.Lock()
		o.ticks = append(o.ticks, t)
		o.mu.Unlock()
		if fn == nil {
			return nil
		}
		return fn(ctx, t)
	}
}

func (o *outcomes) counts() (runs, skips, errs int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ticks), o.skips, len(o.errs)
}

// instances returns n Lockers on one in-memory store: n instances of a
// program, as far as the key is concerned.
func instances(t *testing.T, n int) []*dlock.Locker {
	t.Helper()
	s := memory.NewStore()
	ls := make([]*dlock.Locker, n)
	for i := range ls {
		l, err := memory.New(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		ls[i] = l
	}
	return ls
}

// A tick whose key another instance holds is skipped: the job does not
// run, OnSkip is called, OnError is not.
func TestOnceSkipsWhenHeld(t *testing.T) {
	ctx := context.Background()
	ls := instances(t, 2)
	other, err := ls[1].NewMutex("jobs/report")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer other.Unlock(ctx)

	var o outcomes
	dlockcron.Once(ls[0], "jobs/report", time.Second, o.options()...)(o.job(nil)).Run()
	if runs, skips, errs := o.counts(); runs != 0 || skips != 1 || errs != 0 {
		t.Fatalf("runs, skips, errors = %d, %d, %d; want 0, 1, 0 (errors: %v)", runs, skips, errs, o.errs)
	}
}

// A tick that wins the key runs the job with the key, a token, and a live
// context; successive ticks, on any instance, have increasing tokens.
func TestOnceRunsWithToken(t *testing.T) {
	ls := instances(t, 2)
	const minHold = 50 * time.Millisecond
	var o outcomes
	var live []bool
	job := o.job(func(ctx context.Context, tk dlockcron.Tick) error {
		live = append(live, ctx.Err() == nil)
		return nil
	})
	for i := range 4 {
		start := time.Now()
		dlockcron.Once(ls[i%2], "jobs/report", minHold, o.options()...)(job).Run()
		time.Sleep(minHold - time.Since(start) + 20*time.Millisecond) // past the minimum hold
	}
	if runs, skips, errs := o.counts(); runs != 4 || skips != 0 || errs != 0 {
		t.Fatalf("runs, skips, errors = %d, %d, %d; want 4, 0, 0 (errors: %v)", runs, skips, errs, o.errs)
	}
	for i, tk := range o.ticks {
		if tk.Key != "jobs/report" || tk.Start.IsZero() || !live[i] {
			t.Errorf("tick %d: %+v, context live %v", i, tk, live[i])
		}
		if i > 0 && tk.Token <= o.ticks[i-1].Token {
			t.Errorf("tick %d: token %d after %d, want increasing", i, tk.Token, o.ticks[i-1].Token)
		}
	}
}

// The minimum hold: after the job has returned, the key stays held until
// minHold has passed from the acquisition, so another instance's tick in
// that time is skipped; after it, the next tick runs.
func TestOnceMinimumHoldSkipsTheRestOfThePeriod(t *testing.T) {
	ls := instances(t, 2)
	const minHold = 2 * time.Second
	var a, b outcomes
	start := time.Now()
	dlockcron.Once(ls[0], "jobs/report", minHold, a.options()...)(a.job(nil)).Run()
	dlockcron.Once(ls[1], "jobs/report", minHold, b.options()...)(b.job(nil)).Run()
	if time.Since(start) >= minHold {
		t.Fatalf("the second instance tried %v after the first, past the minimum hold of %v: the test could not check it", time.Since(start), minHold)
	}
	if runs, skips, errs := b.counts(); runs != 0 || skips != 1 || errs != 0 {
		t.Fatalf("within the minimum hold: runs, skips, errors = %d, %d, %d; want 0, 1, 0 (errors: %v)", runs, skips, errs, b.errs)
	}
	time.Sleep(minHold - time.Since(start) + 50*time.Millisecond)
	dlockcron.Once(ls[1], "jobs/report", minHold, b.options()...)(b.job(nil)).Run()
	if runs, _, errs := b.counts(); runs != 1 || errs != 0 {
		t.Fatalf("after the minimum hold: runs, errors = %d, %d; want 1, 0 (errors: %v)", runs, errs, b.errs)
	}
}

// The job's error goes to OnError with the tick it ran with.
func TestOnceReportsJobError(t *testing.T) {
	ls := instances(t, 1)
	boom := errors.New("boom")
	var o outcomes
	dlockcron.Once(ls[0], "jobs/report", 10*time.Millisecond, o.options()...)(o.job(func(context.Context, dlockcron.Tick) error {
		return boom
	})).Run()
	if runs, skips, errs := o.counts(); runs != 1 || skips != 0 || errs != 1 {
		t.Fatalf("runs, skips, errors = %d, %d, %d; want 1, 0, 1", runs, skips, errs)
	}
	if !errors.Is(o.errs[0], boom) || o.errFor[0].Token == 0 || o.errFor[0].Token != o.ticks[0].Token {
		t.Fatalf("OnError(%+v, %v); want the job's error and its tick %+v", o.errFor[0], o.errs[0], o.ticks[0])
	}
}

// A hold lost while the job runs cancels the job's context with the loss
// as its cause, and the tick's error matches dlock.ErrLockLost.
func TestOnceLossCancelsTheJob(t *testing.T) {
	s := memory.NewStore()
	l, err := memory.New(s)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var o outcomes
	var cause error
	dlockcron.Once(l, "jobs/report", 10*time.Millisecond, o.options()...)(o.job(func(ctx context.Context, _ dlockcron.Tick) error {
		if !s.Break("jobs/report") {
			t.Error("Break: the key was not held")
		}
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("the context was not cancelled on loss")
		}
	})).Run()
	if !errors.Is(cause, dlock.ErrLockLost) {
		t.Errorf("context.Cause = %v, want dlock.ErrLockLost", cause)
	}
	if runs, _, errs := o.counts(); runs != 1 || errs != 1 || !errors.Is(o.errs[0], dlock.ErrLockLost) {
		t.Fatalf("runs, errors = %d, %v; want 1 run and an error matching dlock.ErrLockLost", runs, o.errs)
	}
}

// A cron.Job that is not a Job (a cron.FuncJob) runs through its Run,
// under the hold all the same: a second instance's tick within the run is
// skipped.
func TestOnceRunsAPlainJobUnderTheHold(t *testing.T) {
	ls := instances(t, 2)
	var a, b outcomes
	ran := 0
	plain := cron.FuncJob(func() {
		ran++
		dlockcron.Once(ls[1], "jobs/report", 10*time.Millisecond, b.options()...)(b.job(nil)).Run()
	})
	dlockcron.Once(ls[0], "jobs/report", 10*time.Millisecond, a.options()...)(plain).Run()
	if _, skips, errs := b.counts(); ran != 1 || skips != 1 || errs != 0 {
		t.Fatalf("plain job ran %d times; the other instance within it: skips %d, errors %v; want 1, 1, none", ran, skips, b.errs)
	}
	if _, _, errs := a.counts(); errs != 0 {
		t.Fatalf("errors %v", a.errs)
	}
}

// Bad input reaches OnError on every tick and the job never runs.
func TestOnceInvalid(t *testing.T) {
	ls := instances(t, 1)
	for _, tc := range []struct {
		name    string
		locker  *dlock.Locker
		key     string
		minHold time.Duration
		want    error
	}{
		{"no minimum hold", ls[0], "jobs/report", 0, dlock.ErrInvalidOption},
		{"negative minimum hold", ls[0], "jobs/report", -time.Second, dlock.ErrInvalidOption},
		{"nil locker", nil, "jobs/report", time.Second, dlock.ErrInvalidOption},
		{"empty key", ls[0], "", time.Second, dlock.ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o outcomes
			j := dlockcron.Once(tc.locker, tc.key, tc.minHold, o.options()...)(o.job(nil))
			j.Run()
			j.Run()
			if runs, skips, errs := o.counts(); runs != 0 || skips != 0 || errs != 2 {
				t.Fatalf("runs, skips, errors = %d, %d, %d; want 0, 0, 2", runs, skips, errs)
			}
			for _, err := range o.errs {
				if !errors.Is(err, tc.want) {
					t.Errorf("error %v, want %v", err, tc.want)
				}
			}
		})
	}
}

// A closed Locker is an error, not a skip.
func TestOnceClosedLocker(t *testing.T) {
	ls := instances(t, 1)
	ls[0].Close()
	var o outcomes
	dlockcron.Once(ls[0], "jobs/report", time.Second, o.options()...)(o.job(nil)).Run()
	if runs, skips, errs := o.counts(); runs != 0 || skips != 0 || errs != 1 || !errors.Is(o.errs[0], dlock.ErrClosed) {
		t.Fatalf("runs, skips, errors = %d, %d, %v; want 0, 0, one matching dlock.ErrClosed", runs, skips, o.errs)
	}
}

// A panicking job releases its hold (after the minimum) and the panic
// goes on to the wrapper outside Once.
func TestOncePanicReleases(t *testing.T) {
	ls := instances(t, 2)
	const minHold = 50 * time.Millisecond
	var o outcomes
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		dlockcron.Once(ls[0], "jobs/report", minHold, o.options()...)(o.job(func(context.Context, dlockcron.Tick) error {
			panic("boom")
		})).Run()
	}()
	if recovered != "boom" {
		t.Fatalf("recovered %v, want the job's panic", recovered)
	}
	time.Sleep(minHold + 50*time.Millisecond)
	m, err := ls[1].NewMutex("jobs/report")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(context.Background()); err != nil {
		t.Fatalf("after the panic and the minimum hold: %v", err)
	}
	_ = m.Unlock(context.Background())
}

// A job's own error that matches dlock.ErrNotAcquired (a lock the job
// tried) is the job's failure, not a skip.
func TestOnceJobNotAcquiredIsAnError(t *testing.T) {
	ls := instances(t, 1)
	var o outcomes
	dlockcron.Once(ls[0], "jobs/report", 10*time.Millisecond, o.options()...)(o.job(func(context.Context, dlockcron.Tick) error {
		return fmt.Errorf("the job's own lock: %w", dlock.ErrNotAcquired)
	})).Run()
	if runs, skips, errs := o.counts(); runs != 1 || skips != 0 || errs != 1 {
		t.Fatalf("runs, skips, errors = %d, %d, %d; want 1, 0, 1", runs, skips, errs)
	}
}
