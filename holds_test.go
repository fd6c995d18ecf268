package dlock_test

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// batchCounter wraps the memory driver, keeping its BatchRenewer and
// LossNotifier, and counts the renewal calls the portable layer makes.
type batchCounter struct {
	driver.Locker
	batches atomic.Int64 // RenewBatch calls
	renewed atomic.Int64 // holds renewed by them
	singles atomic.Int64 // Renew calls
	fail    atomic.Bool  // every renewal reports the hold lost
}

func (b *batchCounter) Renew(ctx context.Context, h driver.Hold) (time.Duration, error) {
	b.singles.Add(1)
	return b.Locker.Renew(ctx, h)
}

func (b *batchCounter) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	b.batches.Add(1)
	b.renewed.Add(int64(len(hs)))
	if b.fail.Load() {
		errs := make([]error, len(hs))
		for i := range errs {
			errs[i] = driver.ErrNotHeld
		}
		return make([]time.Duration, len(hs)), errs
	}
	return b.Locker.(driver.BatchRenewer).RenewBatch(ctx, hs)
}

func (b *batchCounter) OnLost(h driver.Hold, f func()) func() bool {
	return b.Locker.(driver.LossNotifier).OnLost(h, f)
}

// holdMany locks n keys through l, 16 at a time.
func holdMany(t *testing.T, l *dlock.Locker, n int, prefix string) []*dlock.Mutex {
	t.Helper()
	ms := make([]*dlock.Mutex, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				m, err := l.NewMutex(prefix + strconv.Itoa(i))
				if err == nil {
					err = m.TryLock(context.Background())
				}
				if err != nil {
					errs <- err
					return
				}
				ms[i] = m
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("locking %d keys: %v", n, err)
	}
	return ms
}

// 10,000 holds through one Locker cost no goroutine each: the watchdog is
// one scheduler, and the memory backend reports loss without a goroutine
// per hold. With the old watchdog each hold had a goroutine waiting on its
// Lost channel.
func TestManyHoldsCostNoGoroutinePerHold(t *testing.T) {
	const n = 10000
	l, err := memory.New(memory.NewStore(), dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runtime.GC()
	before := runtime.NumGoroutine()
	ms := holdMany(t, l, n, "g")
	after := runtime.NumGoroutine()
	if per := float64(after-before) / n; per > 0.01 {
		t.Fatalf("%d goroutines for %d holds (%.3f per hold); want at most 0.01 per hold", after-before, n, per)
	}
	for _, m := range ms {
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Holds that are due together are renewed together: the number of
// RenewBatch calls does not grow as one per hold, and no Renew is made one
// hold at a time.
func TestRenewalsAreBatched(t *testing.T) {
	const n = 5000
	b := &batchCounter{Locker: memory.NewStore().Driver()}
	l, err := dlock.NewLocker(b, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ms := holdMany(t, l, n, "b")
	// Wait until every hold has been renewed at least twice.
	deadline := time.Now().Add(time.Minute)
	for b.renewed.Load() < 2*n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d renewals of %d holds in a minute", b.renewed.Load(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := b.singles.Load(); s != 0 {
		t.Fatalf("%d single Renew calls; want every renewal batched", s)
	}
	rounds := b.renewed.Load() / n
	// Holds acquired within a short span fall due within the same few
	// scheduler passes: a handful of calls per round, never one per hold.
	if per := float64(b.batches.Load()) / float64(rounds); per > n/20 {
		t.Fatalf("%d RenewBatch calls for %d renewals of %d holds (%.0f per round); want far fewer than one per hold",
			b.batches.Load(), b.renewed.Load(), n, per)
	}
	for _, m := range ms {
		select {
		case <-m.Done():
			t.Fatalf("hold %s lost: %v", m.Key(), m.Err())
		default:
		}
	}
	for _, m := range ms {
		if err := m.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// A batch that reports each hold lost ends each hold, each with its own
// Done and ErrLockLost.
func TestBatchLossEndsEachHold(t *testing.T) {
	const n = 200
	b := &batchCounter{Locker: memory.NewStore().Driver()}
	l, err := dlock.NewLocker(b, dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ms := holdMany(t, l, n, "x")
	b.fail.Store(true)
	for _, m := range ms {
		select {
		case <-m.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("hold %s not ended after its batch renewal failed", m.Key())
		}
		if !errors.Is(m.Err(), dlock.ErrLockLost) {
			t.Fatalf("Err = %v; want ErrLockLost", m.Err())
		}
	}
	if b.singles.Load() != 0 {
		t.Fatalf("%d single Renew calls; want none", b.singles.Load())
	}
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("this Go runtime does not count goroutines created (%s)", s[0].Name)
	}
	return s[0].Value.Uint64()
}

// A program that locks and unlocks in a loop does not start a goroutine
// per hold: the watchdog's loop stays a while after the last hold ends,
// and a hold granted or ended only resets its timer.
func TestLockUnlockLoopStartsNoGoroutinePerHold(t *testing.T) {
	const n = 500
	ctx := context.Background()
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("k")
	before := goroutinesCreated(t)
	for range n {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched() // let a goroutine started for the hold run
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.Gosched()
	}
	if started := goroutinesCreated(t) - before; started > n/10 {
		t.Fatalf("%d goroutines started for %d Lock+Unlock cycles; want at most %d", started, n, n/10)
	}
}

// stallingBatcher is a batchCounter whose RenewBatch calls wait for their
// context to end: each tells entered how many holds it has, and ended why
// its context ended, and returned counts it as it returns. With release
// set, a call whose context ended returns only once release is closed.
type stallingBatcher struct {
	*batchCounter
	entered  chan int
	ended    chan error
	returned *atomic.Int32
	release  chan struct{}
}

func (b stallingBatcher) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	b.entered <- len(hs)
	<-ctx.Done()
	b.ended <- ctx.Err()
	if b.release != nil {
		<-b.release
	}
	defer b.returned.Add(1)
	errs := make([]error, len(hs))
	for i := range errs {
		errs[i] = driver.Unavailable(ctx.Err())
	}
	return make([]time.Duration, len(hs)), errs
}

// waitCancelled waits for n renewal calls to end, each cancelled.
func (b stallingBatcher) waitCancelled(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case err := <-b.ended:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the renewal call ended with %v; want it cancelled once its holds were unlocked", err)
			}
		case <-time.After(10 * time.Second):
			// Its deadline, the holds' loss, would have ended it sooner:
			// the error above tells the two apart.
			t.Fatal("the renewal call went on for 10s after every hold in it was unlocked")
		}
	}
}

// A renewal batch in flight is cancelled once every hold in it has been
// unlocked, not before, and not only when its deadline comes; each Unlock
// waits for the call to return, so that no renewal reaches the backend
// after Unlock.
func TestUnlockCancelsTheBatchOnceEveryHoldLeft(t *testing.T) {
	b := stallingBatcher{
		batchCounter: &batchCounter{Locker: memory.NewStore().Driver()},
		entered:      make(chan int, 2), ended: make(chan error, 2), returned: new(atomic.Int32),
	}
	// Renewed a second after the grant; the call's deadline, the holds'
	// loss deadline, comes more than a second after that.
	l, err := dlock.NewLocker(b, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ms := holdMany(t, l, 2, "c")
	var calls []int // holds in each call
	for got := 0; got < len(ms); {
		select {
		case n := <-b.entered:
			calls, got = append(calls, n), got+n
		case <-time.After(10 * time.Second):
			t.Fatalf("no renewal batch within 10s of the grants (calls so far: %v)", calls)
		}
	}
	unlocked := make(chan error, len(ms))
	unlock := func(m *dlock.Mutex) {
		err := m.Unlock(context.Background())
		if err == nil && b.returned.Load() == 0 {
			err = errors.New("Unlock returned before the renewal call in flight did")
		}
		unlocked <- err
	}
	if len(calls) == 1 {
		// One call for both: the first Unlock leaves it running.
		go unlock(ms[0])
		select {
		case err := <-b.ended:
			t.Fatalf("the batch of two holds ended (%v) when only one had been unlocked", err)
		case err := <-unlocked:
			t.Fatalf("Unlock returned (%v) while its renewal was still in flight", err)
		case <-time.After(200 * time.Millisecond):
		}
		go unlock(ms[1])
	} else {
		// The grants fell on two steps of the renewal grid: a call each.
		go unlock(ms[0])
		go unlock(ms[1])
	}
	b.waitCancelled(t, len(calls))
	for range ms {
		if err := <-unlocked; err != nil {
			t.Fatal(err)
		}
	}
}

// ownerCheckedStaller is stallingBatcher for a driver whose renewals are
// owner-checked (driver.OwnerCheckedRenewer).
type ownerCheckedStaller struct{ stallingBatcher }

func (ownerCheckedStaller) OwnerCheckedRenewals() bool { return true }

// When the driver's renewals are owner-checked, an Unlock does not wait for
// the renewal batch its hold is in: it releases at once, the batch is
// still cancelled once every hold in it has left, its late answer changes
// nothing (the hold stays unlocked, not lost), and Close waits for it. The
// batch calls return only when the test lets them, after the Unlocks and
// another Locker's TryLocks: an Unlock that waited for its batch would
// never return.
func TestUnlockLeavesAnOwnerCheckedBatch(t *testing.T) {
	store := memory.NewStore()
	release := make(chan struct{})
	b := ownerCheckedStaller{stallingBatcher{
		batchCounter: &batchCounter{Locker: store.Driver()},
		entered:      make(chan int, 2), ended: make(chan error, 2), returned: new(atomic.Int32),
		release: release,
	}}
	var released sync.Once
	letReturn := func() { released.Do(func() { close(release) }) }
	defer letReturn()
	l, err := dlock.NewLocker(b, dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ms := holdMany(t, l, 2, "c")
	calls := 0
	for got := 0; got < len(ms); calls++ {
		select {
		case n := <-b.entered:
			got += n
		case <-time.After(10 * time.Second):
			t.Fatal("no renewal batch within 10s of the grants")
		}
	}
	for i, m := range ms {
		done := make(chan error, 1)
		go func() { done <- m.Unlock(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Unlock %d: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			letReturn()
			t.Fatalf("Unlock %d waited 10s for the renewal batch its hold is in", i)
		}
		if b.returned.Load() != 0 {
			t.Fatal("a renewal call returned before the test let it")
		}
	}
	// Released at once: another Locker takes the keys while the batch is
	// still in flight.
	other, err := dlock.NewLocker(store.Driver())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, m := range ms {
		m2, err := other.NewMutex(m.Key())
		if err == nil {
			err = m2.TryLock(context.Background())
		}
		if err != nil {
			t.Fatalf("TryLock(%q) by another Locker after Unlock: %v", m.Key(), err)
		}
	}
	b.waitCancelled(t, calls)
	letReturn()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := b.returned.Load(); int(n) != calls {
		t.Fatalf("Close returned with %d of %d renewal calls returned", n, calls)
	}
	for _, m := range ms {
		if err := m.Err(); !errors.Is(err, dlock.ErrUnlocked) {
			t.Fatalf("Err after the late batch answered: %v; want ErrUnlocked", err)
		}
	}
}
