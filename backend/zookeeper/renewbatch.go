package zookeeper

import (
	"context"
	"sync"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// renewParallel bounds the per-hold renewals one RenewBatch sends side by
// side over the connection.
const renewParallel = 256

var _ driver.BatchRenewer = (*zkDriver)(nil)

// RenewBatch renews holds that are due together. Where their node watches
// allow it, one leader-ordered read (a sync, then an Exists of "/") stands
// for all of them, instead of one per hold.
//
// Why that is enough: a hold is armed when the watch on its node was set
// by a request asked and answered within the connection's current epoch
// (no disconnection between), with the node ours, and no event of the
// node has come since. ZooKeeper sends a client a watch's event before the
// answer to any request that the server handles after the change, and a
// server answers a sync only once it has applied everything the leader
// committed before it. So if a sync and a read sent at t are answered in
// the same epoch, and the node's event has not come before that answer
// (the event callback runs in go-zookeeper's receive loop, before the
// answers that follow it are delivered), the node still existed with our
// session when the leader handled the sync: what the per-hold read of
// Renew proves, from the same instant t.
//
// A hold that is not armed (after a reconnection, or an event of its node
// such as an operator setting data on it) is renewed on its own, with a
// read that sets the watch again and so arms it for the next round. Over
// a caller's Conn, which has no event callback, every hold is.
func (d *zkDriver) RenewBatch(ctx context.Context, dhs []driver.Hold) ([]time.Duration, []error) {
	ttls := make([]time.Duration, len(dhs))
	errs := make([]error, len(dhs))
	hs := make([]*zkHold, len(dhs))
	for i, dh := range dhs {
		hs[i], errs[i] = holdOf(dh)
	}
	if err := d.check(ctx); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return ttls, errs
	}
	var one []int
	if d.nodes == nil {
		for i, h := range hs {
			if h != nil {
				one = append(one, i)
			}
		}
	} else {
		e := d.nodes.current()
		sid := d.conn.SessionID()
		sent := time.Now()
		_, err := call(ctx, func() (struct{}, error) {
			_, _, err := d.syncRead("/")
			return struct{}{}, err
		})
		if err != nil {
			err = d.fail("renew", err)
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
			return ttls, errs
		}
		fresh := d.nodes.current() == e && d.conn.SessionID() == sid
		if fresh {
			d.mon.confirm(sid, sent)
		}
		for i, h := range hs {
			if h == nil {
				continue
			}
			if fresh && h.sid == sid && h.isArmed(e) {
				ttls[i], errs[i] = h.extend(sent)
				continue
			}
			one = append(one, i)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, renewParallel)
	for _, i := range one {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ttls[i], errs[i] = d.renewOne(ctx, hs[i], true)
		}()
	}
	wg.Wait()
	return ttls, errs
}

// isArmed reports whether h is armed within epoch e.
func (h *zkHold) isArmed(e uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return e != 0 && h.armed == e
}
