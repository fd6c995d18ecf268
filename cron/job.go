package dlockcron

import (
	"context"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/robfig/cron/v3"
)

// Tick is one run of a job that Once let through: the instance that won
// the tick's key.
type Tick struct {
	// Key is the lock's key, Once's argument.
	Key string
	// Token is the fencing token of the tick's hold: strictly greater
	// than every earlier tick's, on every instance. Pass it to the
	// resource the job writes to (package fence), so that a run paused
	// past its lease cannot overwrite a later one. Zero when the job did
	// not run (OnError for a tick whose key could not be tried).
	Token dlock.Token
	// Start is when the tick began on this instance, read before the key
	// was tried: the time the Cron started the job, to within the time
	// it takes to start a goroutine.
	Start time.Time
}

// Job is a job that takes the context and the Tick of its run. Wrapped by
// Once, it runs only on the instance that holds the tick's key; its
// context is cancelled when that hold is lost (context.Cause matches
// dlock.ErrLockLost, as in dlock.Do), and its error goes to OnError and the
// logger.
//
// Job is a cron.Job so that Cron.AddJob and Cron.Schedule take it. Once
// must be given the Job itself, so make Once the last wrapper of the
// chain (cron.WithChain(cron.Recover(l), dlockcron.Once(...)): the first
// wrapper is the outermost); a wrapper between them hides the Job, which
// then runs through Run. Run, called by a Cron without Once, runs j on this
// instance alone with no lock: context.Background and a Tick with a zero
// Token.
type Job func(ctx context.Context, t Tick) error

// Run runs j with context.Background and a Tick with no hold; its error is
// dropped. Once calls j itself and never Run.
func (j Job) Run() { _ = j(context.Background(), Tick{Start: time.Now()}) }

var _ cron.Job = Job(nil)

// contextJob returns the function Once runs for j: j itself when it is a
// Job, otherwise j.Run under the hold (a cron.FuncJob or any cron.Job,
// which sees neither the context nor the token).
func contextJob(j cron.Job) Job {
	if cj, ok := j.(Job); ok && cj != nil {
		return cj
	}
	return func(context.Context, Tick) error {
		j.Run()
		return nil
	}
}
