package lockctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
)

// The scenarios lockctl bench runs, in this order.
const (
	scenUncontended  = "uncontended"
	scenParallelKeys = "parallel-keys"
	scenContended    = "contended"
)

var allScenarios = []string{scenUncontended, scenParallelKeys, scenContended}

// scenarioText describes each scenario for the help and the reports.
var scenarioText = map[string]string{
	scenUncontended:  "one goroutine, one key: Lock+Unlock in a loop (latency of a free lock)",
	scenParallelKeys: "N goroutines, one Locker, a key each (throughput over many keys)",
	scenContended:    "N goroutines over 2 Lockers on one key, holding it --hold each time (handoff)",
}

// limits says when a scenario stops: after duration, or after iterations
// acquisitions if that comes first.
type limits struct {
	duration   time.Duration
	iterations int // 0: no limit
}

// runState is shared by a scenario's goroutines.
type runState struct {
	stop      atomic.Bool
	remaining atomic.Int64 // acquisitions left; only with an iterations limit
	limited   bool
	ops       atomic.Int64
	errOnce   sync.Once
	err       error
}

func newRunState(lim limits) *runState {
	rs := &runState{limited: lim.iterations > 0}
	rs.remaining.Store(int64(lim.iterations))
	return rs
}

// next reports whether another acquisition may start.
func (rs *runState) next() bool {
	if rs.stop.Load() {
		return false
	}
	return !rs.limited || rs.remaining.Add(-1) >= 0
}

func (rs *runState) fail(err error) {
	rs.errOnce.Do(func() { rs.err = err })
	rs.stop.Store(true)
}

// scenarioResult is what one scenario measured.
type scenarioResult struct {
	ops        int64
	elapsed    time.Duration
	lockP50    time.Duration
	lockP99    time.Duration
	handoffP50 time.Duration
	handoffP99 time.Duration
}

// runScenario runs one scenario. newLocker makes an independent Locker;
// onStart is called once the Lockers are connected and warmed up, just
// before the measured part starts.
func runScenario(ctx context.Context, name string, cfg benchConfig, newLocker func() (*dlock.Locker, error), keyBase string, onStart func()) (scenarioResult, error) {
	lockers := 1
	goroutines := 1
	switch name {
	case scenParallelKeys:
		goroutines = cfg.parallel
	case scenContended:
		goroutines, lockers = cfg.contenders, 2
	}
	ls := make([]*dlock.Locker, lockers)
	for i := range ls {
		l, err := newLocker()
		if err != nil {
			return scenarioResult{}, err
		}
		defer l.Close()
		ls[i] = l
	}
	ms := make([]*dlock.Mutex, goroutines)
	for g := range ms {
		key := keyBase + "/" + name
		if name == scenParallelKeys {
			key += "/" + strconv.Itoa(g)
		}
		var opts []dlock.Option
		if cfg.ttl > 0 {
			opts = append(opts, dlock.WithTTL(cfg.ttl))
		}
		m, err := ls[g%lockers].NewMutex(key, opts...)
		if err != nil {
			return scenarioResult{}, err
		}
		ms[g] = m
	}
	// Warm up: connections, scripts, sessions.
	if err := lockUnlock(ctx, ms[0]); err != nil {
		return scenarioResult{}, fmt.Errorf("warm-up: %w", err)
	}

	onStart()
	rs := newRunState(limits{cfg.duration, cfg.iterations})
	lockS := make([]*sampler, goroutines)
	handS := make([]*sampler, goroutines)
	var lastRelease atomic.Int64 // UnixNano when the last holder began Unlock
	var wg sync.WaitGroup
	timer := time.AfterFunc(cfg.duration, func() { rs.stop.Store(true) })
	defer timer.Stop()
	start := time.Now()
	for g := range goroutines {
		lockS[g], handS[g] = newSampler(), newSampler()
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := ms[g]
			for rs.next() {
				t0 := time.Now()
				if err := m.Lock(ctx); err != nil {
					rs.fail(fmt.Errorf("lock: %w", err))
					return
				}
				got := time.Now()
				lockS[g].add(got.Sub(t0))
				rs.ops.Add(1)
				if name == scenContended {
					if rel := lastRelease.Load(); rel != 0 && rel > t0.UnixNano() {
						handS[g].add(got.Sub(time.Unix(0, rel)))
					}
					time.Sleep(cfg.hold)
					lastRelease.Store(time.Now().UnixNano())
				}
				if err := m.Unlock(ctx); err != nil {
					rs.fail(fmt.Errorf("unlock: %w", err))
					return
				}
			}
		}()
	}
	wg.Wait()
	res := scenarioResult{ops: rs.ops.Load(), elapsed: time.Since(start)}
	if rs.err != nil {
		return res, rs.err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	res.lockP50, res.lockP99 = percentiles(lockS)
	if name == scenContended {
		res.handoffP50, res.handoffP99 = percentiles(handS)
	}
	return res, nil
}

func lockUnlock(ctx context.Context, m *dlock.Mutex) error {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	if err := m.Lock(ctx); err != nil {
		return err
	}
	if err := m.Unlock(ctx); err != nil && !errors.Is(err, dlock.ErrLockLost) {
		return err
	}
	return nil
}
