package redlock

import (
	"context"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.OwnerCheckedRenewer = (*Driver)(nil)

// OwnerCheckedRenewals reports true: on every instance the renewal extends
// the lock only while its value is the hold's own Owner, which no later
// hold shares, so a renewal that reaches an instance after the release
// changes nothing there, and Unlock need not wait for the batch it is in
// (with 100,000 holds at a 3s TTL a batch waited for its turn behind the
// others due with it, and the holds were released a few hundred a second).
func (d *Driver) OwnerCheckedRenewals() bool { return true }

// renewChunk is how many holds one RenewMany call renews: a pipeline's
// worth (maxPipeline), so that no call keeps an instance busy longer than
// a pipeline of single requests would.
const renewChunk = maxPipeline

// RenewBatch renews many holds for a few script calls per instance: the
// holds renewable on an instance are checked and extended there by
// RenewMany calls of up to renewChunk holds each, all queued on every
// instance before any reply is awaited. Each hold is then judged exactly
// as Renew judges it, on its own replies: the owner-checked extension on a
// majority renews it, a majority that no longer has it loses it, and
// anything else leaves it unknown (ErrUnavailable).
//
// Unlike Renew, RenewBatch waits for every instance's reply (or its
// per-instance timeout, the shortest of the batch's): it never returns
// before a majority answered, only later, and a hold's validity is counted
// from the send, not from the reply. The wait is the renewals'
// backpressure: the next batch goes out only once the slowest instance
// answered this one. Returning at a majority, as Renew does, spares the
// batch a paused instance's timeout, but under load it lets the slowest
// instances' queues grow until their requests run out of time, and then
// another instance becomes the slowest: with 100,000 holds at a 3s TTL
// through one Locker on 2 cores, two runs that returned at a majority lost
// 34,106 and 71,029 holds, two that waited lost 0 and 887.
func (d *Driver) RenewBatch(ctx context.Context, hs []driver.Hold) ([]time.Duration, []error) {
	ttls, errs := make([]time.Duration, len(hs)), make([]error, len(hs))
	if err := d.check(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return ttls, errs
	}
	sts := make([]*attempt, len(hs))
	// Holds renewable on the same instances (usually all of them), at the
	// same lease, share their requests: a chunk's RenewMany is built once
	// and sent to each.
	type group struct {
		set   uint64
		lease int64
	}
	groups := map[group][]int{}
	var order []group
	timeout := time.Duration(0)
	for i, h := range hs {
		st, err := state(h)
		if err != nil {
			errs[i] = err
			continue
		}
		sts[i] = st
		if t := d.timeout(st.ttl); timeout == 0 || t < timeout {
			timeout = t
		}
		g := group{set: uint64(i), lease: st.ttl.Milliseconds()} // with 64 instances or more, a group of its own
		if len(d.inst) < 64 {
			g.set = st.renewableSet()
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	// One call per chunk and instance, in one fan-out.
	var chunks [][]int // of each call
	p := &pendingFanout{d: d, timeout: timeout}
	var reqs []request
	for _, g := range order {
		idx := groups[g]
		inst := sts[idx[0]].renewable()
		for len(idx) > 0 {
			n := min(len(idx), renewChunk)
			req := renewManyRequest(sts, idx[:n])
			for _, k := range inst {
				chunks = append(chunks, idx[:n])
				reqs = append(reqs, req)
				p.idx = append(p.idx, k)
			}
			idx = idx[n:]
		}
	}
	if len(chunks) > 0 {
		p.g = newGroup(len(chunks), 0, nil)
		p.submitted = time.Now()
		p.calls = make([]*call, len(chunks))
		for c := range chunks {
			p.calls[c] = d.inst[p.idx[c]].batch.submit(reqs[c], timeout, p.g)
		}
	}
	// Each hold's replies, counted as they are read.
	tallies := make([]tally, len(hs))
	for c, r := range p.wait(ctx) {
		chunk := chunks[c]
		var vals []any
		var perrs []error
		err := r.err
		if err == nil {
			vals, perrs, err = redislua.ParseRenewMany(r.val, len(chunk))
		}
		for j, i := range chunk {
			rp := reply{inst: r.inst, err: err}
			if err == nil {
				rp.val, rp.err = vals[j], perrs[j]
			}
			d.count(&tallies[i], rp)
		}
	}
	for i, st := range sts {
		if st != nil {
			ttls[i], errs[i] = d.renewed(ctx, tallies[i], st)
		}
	}
	return ttls, errs
}

// renewManyRequest is RenewMany for the holds chunk of sts, which share
// their lease: the holds' lock keys, the lease, and each hold's owner, as
// one command line (request.wire) that every instance's pipeline sends as
// it is: with thousands of holds renewed each second, building the
// arguments once per chunk rather than once per instance spares go-redis a
// copy and a boxed key per hold and instance, and the collector that
// garbage.
func renewManyRequest(sts []*attempt, chunk []int) request {
	wire := make([]any, 0, 4+2*len(chunk))
	wire = append(wire, "evalsha", redislua.RenewMany.Hash(), len(chunk))
	for _, i := range chunk {
		wire = append(wire, sts[i].lock)
	}
	wire = append(wire, sts[chunk[0]].ttl.Milliseconds())
	for _, i := range chunk {
		wire = append(wire, sts[i].owner)
	}
	return request{script: redislua.RenewMany, wire: wire}
}
