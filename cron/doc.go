// Package dlockcron runs each tick of a github.com/robfig/cron/v3 job on
// one instance only, of all the instances of a program that schedule it,
// with a dlock Mutex per tick. It is a module of its own
// (github.com/dlock-go/dlock/cron), so that only a program that uses
// robfig/cron has it in its module graph; it requires dlock and
// robfig/cron v3.0.1 and nothing else.
//
//	once := dlockcron.Once(locker, "reports/hourly", 54*time.Minute)
//	c := cron.New(cron.WithChain(cron.Recover(logger), once))
//	c.AddJob("@hourly", dlockcron.Job(func(ctx context.Context, t dlockcron.Tick) error {
//		return writeReport(ctx, t.Token) // ctx ends if the hold is lost
//	}))
//	c.Start()
//
// # Why a minimum hold
//
// Locking the job's run alone does not make it run once: instances'
// clocks and schedules are apart. Three instances of an every-second job
// with a 0.3 s body, their schedules 0.5 s apart, each taking the lock
// with TryLock and releasing it when the job returns, run every tick two
// or three times: the first instance has released the key before the next
// one's schedule fires. Once takes each tick's lock with
// dlock.WithMinHold: when the job returns, the key stays held on the store
// until the minimum has passed from the acquisition (also when the
// release comes from the Locker's Close or the process exits), so every
// later instance's attempt in that period finds it held and skips the
// tick; the next period's first attempt finds it free. ShedLock calls the
// same thing lockAtLeastFor.
//
// # Choosing the minimum
//
// For a job every period P on instances whose runs of one tick are at
// most G apart (the skew of their clocks and schedules, plus a round trip
// to the store), any minimum M with G < M < P - J, J being the jitter of a
// round trip and of the Cron's timer, runs every tick exactly once: the
// instances later than the winner by less than M skip, and the next tick
// finds the key free on the earliest instance (or, when that one is late,
// on the next one). M = P*9/10 tolerates G up to nearly P*9/10 and leaves
// P/10 for J. A schedule whose ticks are unevenly spaced ("0 9 * * 1-5")
// takes the shortest interval as P. Once has no default: a JobWrapper
// does not see the schedule. Every instance should give the same M, and
// the key is the job's, shared by no other job.
//
// A minimum above P is a different policy, not an error: the key is still
// held when the next tick fires, so the job runs at most once every M.
//
// # The job
//
// A Job (func(ctx context.Context, t Tick) error) runs with the context of
// its hold (cancelled when the hold is lost, with context.Cause matching
// dlock.ErrLockLost, as in dlock.Do) and its Tick, which carries the
// fencing token: pass it to the resource the job writes (package fence) so
// that a run paused past its lease cannot overwrite a later tick's. Any
// other cron.Job (a cron.FuncJob) runs through its Run under the hold all
// the same, without the context or the token. Once must be the last
// wrapper of the chain, so that it is given the Job itself.
//
// # Skips and errors
//
// A tick that finds the key held is skipped: logged at Info ("skip") to
// the cron.Logger of WithLogger, and given to OnSkip. A job's error (joined
// with the loss when the hold was lost meanwhile), or a lock error (the
// store did not answer, the Locker was closed, bad input) is logged at
// Error and given to OnError. A panic in the job releases the hold (with
// its minimum) and goes on to the next wrapper, cron.Recover for example.
//
// # gocron
//
// github.com/go-co-op/gocron/v2 takes a distributed lock as
// WithDistributedLocker(Locker), Locker being Lock(ctx, key) (Lock, error)
// and Lock being Unlock(ctx) error, and a leader as
// WithDistributedElector(Elector), Elector being IsLeader(ctx) error. Both
// can be served by dlock the same way, in a few lines of a program's own:
// Lock makes a Mutex on the job's name with dlock.WithMinHold and returns
// its TryLock's error (gocron skips the run on any error), and the Lock it
// returns is the Mutex (Unlock(ctx) error already); IsLeader returns nil
// while a dlock.Election's Lease().Valid(), the program campaigning with
// dlock.Do over the Election beside the scheduler. What such an adapter
// cannot give is what Once gives: gocron hands the lock to no job, so its
// jobs get no fencing token, and the context it gives a job ends at the
// scheduler's shutdown, not when the hold is lost. And the versions of
// gocron v2 this project can depend on are not approved releases, so no
// adapter is shipped: the module would impose one on its users.
package dlockcron
