package file

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/driver"
)

var (
	_ driver.BatchRenewer        = (*fileDriver)(nil)
	_ driver.OwnerCheckedRenewer = (*fileDriver)(nil)
)

// OwnerCheckedRenewals reports true: a renewal extends the lease only when
// the key's file, flocked and still the one at its path, names this hold's
// owner and token, and a release clears the owner under the same flock, so
// a renewal that comes after the release changes nothing, and Unlock need
// not wait for the batch it is in.
func (d *fileDriver) OwnerCheckedRenewals() bool { return true }

// RenewBatch renews hs, each exactly as Renew would, on as many
// goroutines as the process has cores (GOMAXPROCS), the caller's among
// them.
//
// A renewal is a read-modify-write of the key's file, bound by CPU, not a
// round trip, so there is nothing to pipeline; what the batch saves is
// goroutines. Without RenewBatch the portable layer renews each hold on
// its own, with up to a thousand goroutines at once when many holds fall
// due together; with it, a few batches at a time, each on a few cores.
func (d *fileDriver) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(hs)), make([]error, len(hs))
	var next atomic.Int64
	work := func() {
		for i := int(next.Add(1) - 1); i < len(hs); i = int(next.Add(1) - 1) {
			ttls[i], errs[i] = d.Renew(ctx, hs[i])
		}
	}
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(hs)) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
	return ttls, errs
}
