package consul

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// maxTxnOps is the most key reads put in one transaction: the limit of
// Consul's /v1/txn (64 operations).
const maxTxnOps = 64

// readParallel bounds the read transactions of one renewal in flight, and
// perHoldRenewers the Renew calls of RenewBatch for holds on sessions of
// their own (Config.SessionPerHold).
const (
	readParallel    = 8
	perHoldRenewers = 16
)

var _ driver.BatchRenewer = (*consulDriver)(nil)

// RenewBatch renews holds that share a session with one renewal of that
// session (after its sweep, see sharedSessions), then checks their keys
// with read-only transactions of up to maxTxnOps reads each: a renewal
// round of 100,000 holds costs one session renewal and about 1,600 reads
// served by the leader's memory, not 100,000 renewals. Each hold is judged
// as Renew judges it: its key must still be locked by its session at its
// index, else it is lost (ErrLockLost); a session found gone loses every
// hold on it. Holds on sessions of their own are renewed one by one, a few
// at a time.
func (d *consulDriver) RenewBatch(ctx context.Context, dhs []driver.Hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(dhs)), make([]error, len(dhs))
	if err := d.check(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return ttls, errs
	}
	groups := map[*session][]int{}
	var single []int
	for i, dh := range dhs {
		h, err := holdOf(dh)
		switch {
		case err != nil:
			errs[i] = err
		case h.s.shared:
			groups[h.s] = append(groups[h.s], i)
		default:
			single = append(single, i)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, perHoldRenewers)
	for _, i := range single {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ttls[i], errs[i] = d.Renew(ctx, dhs[i])
		}()
	}
	for s, idx := range groups {
		hs := make([]*hold, len(idx))
		for k, i := range idx {
			hs[k] = dhs[i].State.(*hold)
		}
		gt, ge := d.renewSharedHolds(ctx, s, hs)
		for k, i := range idx {
			ttls[i], errs[i] = gt[k], ge[k]
		}
	}
	wg.Wait()
	return ttls, errs
}

// renewSharedHolds renews the holds hs, all on the shared session s: one
// renewal of s, then reads of their keys.
func (d *consulDriver) renewSharedHolds(ctx context.Context, s *session, hs []*hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(hs)), make([]error, len(hs))
	fail := func(f func(h *hold) error) ([]time.Duration, []error) {
		for k, h := range hs {
			errs[k] = f(h)
		}
		return ttls, errs
	}
	sent, ok, err := d.renewShared(ctx, s)
	if err != nil {
		return fail(func(*hold) error { return err })
	}
	if !ok {
		return fail(func(h *hold) error { return errSessionGone(h.path) })
	}
	_, ttl := s.state()
	owned, err := d.readOwned(ctx, hs)
	if err != nil {
		return fail(func(*hold) error { return err })
	}
	for k, h := range hs {
		switch {
		case !owned[k]:
			h.lost.Mark()
			errs[k] = fmt.Errorf("consul: renew %q: key deleted or taken over: %w", h.path, driver.ErrLockLost)
		case !s.extend(h, sent.Add(ttl)):
			// Swept: its own validity had ended before this renewal.
			errs[k] = fmt.Errorf("consul: renew %q: validity ended before the renewal: %w", h.path, driver.ErrLockLost)
		default:
			ttls[k] = ttl
		}
	}
	return ttls, errs
}

// readOwned reads the keys of hs, maxTxnOps to a transaction, and reports
// for each whether it is still the hold's (see hold.owns).
func (d *consulDriver) readOwned(ctx context.Context, hs []*hold) ([]bool, error) {
	owned := make([]bool, len(hs))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lastErr error
	)
	sem := make(chan struct{}, readParallel)
	for start := 0; start < len(hs); start += maxTxnOps {
		end := min(start+maxTxnOps, len(hs))
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := d.readPart(ctx, hs[start:end], owned[start:end]); err != nil {
				mu.Lock()
				lastErr = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return owned, lastErr
}

// readPart reads the keys of hs in one read-only transaction and sets
// owned. A get of a missing key fails the whole transaction, naming it:
// that hold is not owned, and the transaction is sent again without it.
func (d *consulDriver) readPart(ctx context.Context, hs []*hold, owned []bool) error {
	idx := make([]int, len(hs))
	for k := range idx {
		idx[k] = k
	}
	for len(idx) > 0 {
		ops := make(api.TxnOps, len(idx))
		for j, k := range idx {
			ops[j] = &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGet, Key: hs[k].path}}
		}
		ok, resp, _, err := d.c.Txn().Txn(ops, d.qopts(ctx))
		if err != nil {
			return mapErr(ctx, "renew", err)
		}
		if ok {
			if len(resp.Results) != len(idx) {
				return driver.Unavailable(fmt.Errorf("consul: renew: %d results for %d reads", len(resp.Results), len(idx)))
			}
			for j, k := range idx {
				owned[k] = hs[k].owns(resp.Results[j].KV)
			}
			return nil
		}
		if resp == nil || len(resp.Errors) == 0 {
			return driver.Unavailable(fmt.Errorf("consul: renew: read transaction rolled back (%s)", txnErrors(resp)))
		}
		missing := map[int]bool{}
		for _, e := range resp.Errors {
			if e.OpIndex < 0 || e.OpIndex >= len(idx) {
				return driver.Unavailable(fmt.Errorf("consul: renew: read transaction rolled back (%s)", txnErrors(resp)))
			}
			missing[e.OpIndex] = true
		}
		j := 0
		idx = slices.DeleteFunc(idx, func(int) bool { j++; return missing[j-1] })
	}
	return nil
}
