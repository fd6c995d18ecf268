package redlock

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redislua"
)

// A burst of renewals goes out in pipelines of at most maxPipeline
// requests, and an acquire or release submitted behind it goes out in the
// next pipeline, not after the whole burst: a pipeline of the renewals of
// thousands of holds took an instance longer than the per-instance
// timeout to answer, and the acquires sent in it or queued behind it
// failed with "no answer".
func TestBatcherSendsOtherRequestsBeforeRenewals(t *testing.T) {
	var b batcher
	renew := func() *call { return &call{req: request{script: redislua.Renew}} }
	const burst = 5 * maxPipeline
	for range burst {
		b.enqueue(renew())
	}
	acq := &call{req: request{script: redislua.Acquire}}
	rel := &call{req: request{script: redislua.Release}}
	b.enqueue(acq)
	b.enqueue(rel)

	first := b.take(time.Now())
	if len(first) != maxPipeline+1 {
		t.Fatalf("first pipeline: %d requests; want %d and the release", len(first), maxPipeline)
	}
	if first[0] != rel || first[1] != acq {
		t.Fatal("the release and acquire queued behind a burst of renewals are not the first requests sent")
	}
	sent := len(first)
	for p := b.take(time.Now()); len(p) > 0; p = b.take(time.Now()) {
		if len(p) > maxPipeline {
			t.Fatalf("a pipeline of %d requests; want at most %d", len(p), maxPipeline)
		}
		for _, c := range p {
			if c.req.script != redislua.Renew {
				t.Fatal("a request sent twice")
			}
		}
		sent += len(p)
	}
	if sent != burst+2 {
		t.Fatalf("%d requests sent; want %d", sent, burst+2)
	}
	if b.relief != nil || b.queue != nil || b.bulk != nil {
		t.Fatal("the queues keep their arrays after they were drained")
	}
}

// Once the oldest queued renewal has waited renewalsOverdue, renewals go
// out first and other requests get the room they leave: a Locker whose
// instances cannot keep up keeps the holds it has rather than taking new
// ones (with acquires first, 100,000 holds at a 3s TTL on 2 cores lost a
// third to a half of them while the last were acquired).
func TestBatcherSendsOverdueRenewalsFirst(t *testing.T) {
	var b batcher
	const burst = 3 * maxPipeline
	for range burst {
		b.enqueue(&call{req: request{script: redislua.Renew}})
	}
	acq := &call{req: request{script: redislua.Acquire}}
	b.enqueue(acq)
	first := b.take(time.Now())
	if len(first) == 0 || first[0] != acq {
		t.Fatal("renewals queued just now went out before the acquire")
	}
	left := burst - (len(first) - 1) // renewals still queued
	b.enqueue(acq)
	later := time.Now().Add(renewalsOverdue)
	sent := 0
	for p := b.take(later); len(p) > 0; p = b.take(later) {
		if len(p) > maxPipeline {
			t.Fatalf("a pipeline of %d requests; want at most %d", len(p), maxPipeline)
		}
		for _, c := range p {
			if c == acq && sent < left-maxPipeline {
				t.Fatalf("the acquire went out after %d of %d overdue renewals; want in the last pipeline", sent, left)
			}
			sent++
		}
	}
	if sent != left+1 {
		t.Fatalf("%d requests sent; want %d", sent, left+1)
	}

	// An overdue RenewMany leaves room for an acquire in its pipeline.
	many := &call{req: renewManyRequest(manyStates(200), seq(200))}
	b.enqueue(many)
	b.enqueue(acq)
	if p := b.take(time.Now().Add(renewalsOverdue)); len(p) != 2 || p[0] != acq || p[1] != many {
		t.Fatalf("an overdue RenewMany of 200 and an acquire: %d calls in the pipeline; want both", len(p))
	}
}

// Releases go out first, before acquires and before renewals, overdue or
// not: each ends a hold, and an Unlock must not wait behind the renewals
// of other holds; and overdue renewals still go out while releases keep
// coming.
func TestBatcherSendsReleasesFirst(t *testing.T) {
	var b batcher
	var renewals []*call
	for range 3 {
		c := &call{req: renewManyRequest(manyStates(maxPipeline), seq(maxPipeline))}
		renewals = append(renewals, c)
		b.enqueue(c)
	}
	acq := &call{req: request{script: redislua.Acquire}}
	var rels []*call
	queue := func() {
		for _, rel := range rels {
			b.enqueue(rel)
		}
	}
	b.enqueue(acq)
	for range 3 {
		rels = append(rels, &call{req: request{script: redislua.Release}})
	}
	queue()
	first := b.take(time.Now())
	if len(first) != len(rels)+1 || first[0] != rels[0] || first[1] != rels[1] || first[2] != rels[2] || first[3] != acq {
		t.Fatalf("renewals not overdue: %d calls; want the releases, then the acquire", len(first))
	}
	// Overdue renewals: the releases still go first, and the renewals go
	// with them (releases that kept coming must not hold them back).
	for k := range renewals {
		queue()
		p := b.take(time.Now().Add(renewalsOverdue))
		if len(p) != len(rels)+1 || p[0] != rels[0] || p[1] != rels[1] || p[2] != rels[2] || p[3] != renewals[k] {
			t.Fatalf("overdue renewals, pipeline %d: %d calls; want the releases, then the RenewMany queued %d-th", k, len(p), k)
		}
	}
	if b.relief != nil || b.queue != nil || b.bulk != nil {
		t.Fatal("requests left in the queues")
	}
}

func manyStates(n int) []*attempt {
	sts := make([]*attempt, n)
	for i := range sts {
		sts[i] = &attempt{lock: "k" + strconv.Itoa(i), owner: "o", ttl: time.Second}
	}
	return sts
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// A RenewMany counts against maxPipeline by its keys, so that a pipeline
// of them cannot carry more than maxPipeline renewals; one heavier than
// the room left waits for the next pipeline.
func TestBatcherWeighsRenewMany(t *testing.T) {
	var b batcher
	many := func(keys int) *call { // as RenewBatch builds them
		sts, chunk := make([]*attempt, keys), make([]int, keys)
		for i := range sts {
			sts[i], chunk[i] = &attempt{lock: "k" + strconv.Itoa(i), owner: "o", ttl: time.Second}, i
		}
		return &call{req: renewManyRequest(sts, chunk)}
	}
	acq := &call{req: request{script: redislua.Acquire}}
	b.enqueue(many(200))
	b.enqueue(many(100))
	b.enqueue(acq)
	b.enqueue(many(maxPipeline + 10))

	if p := b.take(time.Now()); len(p) != 2 || p[0] != acq || weight(p[1]) != 200 {
		t.Fatalf("first pipeline: %d calls; want the acquire and the first RenewMany only", len(p))
	}
	if p := b.take(time.Now()); len(p) != 1 || weight(p[0]) != 100 {
		t.Fatalf("second pipeline: %d calls; want the RenewMany of 100 alone", len(p))
	}
	if p := b.take(time.Now()); len(p) != 1 || weight(p[0]) != maxPipeline+10 {
		t.Fatal("an oversized RenewMany is never sent")
	}
	if p := b.take(time.Now()); len(p) != 0 {
		t.Fatal("calls left over")
	}
}

// fold sends a pipeline's single renewals as one RenewMany per lease (a
// RenewMany extends all its keys to one lease), and a renewal alone at its
// lease as it came; each call keeps its own key, owner and lease.
func TestFoldGroupsRenewalsByLease(t *testing.T) {
	renew := func(key string, lease int64) *call {
		keys, args := redislua.RenewArgs(key, "owner-"+key, lease)
		return &call{req: request{script: redislua.Renew, keys: keys, args: args}}
	}
	acq := &call{req: request{script: redislua.Acquire}}
	calls := []*call{renew("a", 3000), acq, renew("b", 9000), renew("c", 3000), renew("d", 3000)}
	units := fold(calls)
	if len(units) != 3 || units[0].calls[0] != acq {
		t.Fatalf("%d units; want the acquire, a RenewMany at 3000 ms and the renewal at 9000 ms alone", len(units))
	}
	many, single := units[1], units[2]
	if !many.folded || many.script != redislua.RenewMany || len(many.calls) != 3 {
		t.Fatalf("first renewal unit: folded %v, %d calls; want a RenewMany of a, c and d", many.folded, len(many.calls))
	}
	wantArgs := []any{int64(3000), "owner-a", "owner-c", "owner-d"}
	if strings.Join(many.keys, ",") != "a,c,d" || fmt.Sprint(many.args) != fmt.Sprint(wantArgs) {
		t.Fatalf("RenewMany keys %v args %v; want [a c d] %v", many.keys, many.args, wantArgs)
	}
	if single.folded || single.script != redislua.Renew || single.keys[0] != "b" || single.args[1] != int64(9000) {
		t.Fatalf("the renewal at another lease: %+v; want b's Renew as it came", single)
	}
	// A renewal whose arguments are not RenewArgs' goes alone.
	odd := &call{req: request{script: redislua.Renew, keys: []string{"e"}, args: []any{"owner-e", "3000"}}}
	if units := fold([]*call{renew("a", 3000), odd}); len(units) != 2 || units[0].folded || units[1].folded {
		t.Fatalf("%d units; want two single renewals", len(units))
	}
}
