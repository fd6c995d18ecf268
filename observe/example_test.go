package observe_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/observe"
)

// acquisitions counts the locks taken and the holds that ended: an Observer
// only has to be quick and must not call back into the lock.
type acquisitions struct {
	taken, ended atomic.Int64
}

func (a *acquisitions) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }
func (a *acquisitions) Step(context.Context, observe.Call, observe.Step)          {}
func (a *acquisitions) HoldEnd(observe.HoldEnd)                                   { a.ended.Add(1) }

func (a *acquisitions) End(_ context.Context, c observe.Call, r observe.Result) {
	if (c.Op == observe.OpLock || c.Op == observe.OpTryLock) && r.Outcome == observe.OutcomeAcquired {
		a.taken.Add(1)
	}
}

// An Observer of your own, given to every lock of a Locker.
func ExampleObserver() {
	ctx := context.Background()
	counts := &acquisitions{}
	locker, err := dlock.Open(ctx, "mem://example-observer", dlock.WithObserver(counts))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	m, _ := locker.NewMutex("jobs/nightly")
	for range 3 {
		_ = dlock.Do(ctx, m, func(context.Context) error { return nil })
	}
	fmt.Println("taken:", counts.taken.Load(), "ended:", counts.ended.Load())
	// Output:
	// taken: 3 ended: 3
}
