package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// A waiter keeps its shared lease alive in the lease's renewal turn, with
// a keepalive its own round confirms. Its keepalive used to go out
// beside the turn and stay pending on the lease, where the read of a
// round running in the turn, asked for before that keepalive was
// answered, could confirm it: the interleaving the turn closed for
// renewals (a deposed leader may have answered it). Here the test holds
// the turn when the waiter's keepalive falls due: the waiter must send
// nothing and record nothing until it gets the turn, and then confirm its
// keepalive.
func TestWaiterKeepaliveTakesTheTurn(t *testing.T) {
	d, kas := countingDriver(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key, ttl = "waiter-turn", 3 * time.Second
	// The holder: an entry of another client, created before the waiter's.
	holder := d.queue(key) + "0"
	if _, err := d.cli.Put(ctx, holder, "holder"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		h   driver.Hold
		err error
	}
	acquired := make(chan result, 1)
	go func() {
		h, err := d.Acquire(ctx, driver.Request{Key: key, TTL: ttl, Owner: owner()})
		acquired <- result{h, err}
	}()
	var l *lease
	for l == nil {
		select {
		case r := <-acquired:
			t.Fatalf("Acquire returned while the key was held: %v", r.err)
		case <-ctx.Done():
			t.Fatal("the waiter never got a shared lease")
		case <-time.After(time.Millisecond):
		}
		d.leases.mu.Lock()
		l = d.leases.sharedBy[seconds(ttl)]
		d.leases.mu.Unlock()
	}
	if err := l.take(ctx); err != nil {
		t.Fatal(err)
	}
	sent := kas.Load()
	l.mu.Lock()
	pend := l.pend
	l.mu.Unlock()
	asked := time.Now()
	// A third of the TTL after the grant, the waiter keeps its lease
	// alive: it must ask for a round and wait for the turn.
	check := func(when string) {
		t.Helper()
		if n := kas.Load() - sent; n != 0 {
			t.Fatalf("%s: the waiter sent %d keepalive(s) while another renewal had the lease's turn", when, n)
		}
		l.mu.Lock()
		p := l.pend
		l.mu.Unlock()
		if p != pend {
			t.Fatalf("%s: the waiter recorded a pending keepalive (sent %v) outside the lease's turn", when, p.sent.Sub(asked))
		}
	}
	for {
		check("before the waiter asked for a round")
		l.mu.Lock()
		r := l.round
		l.mu.Unlock()
		if r != nil && !r.start.Before(asked) {
			break
		}
		select {
		case r := <-acquired:
			t.Fatalf("Acquire returned while the key was held: %v", r.err)
		case <-ctx.Done():
			t.Fatal("the waiter never kept its lease alive")
		case <-time.After(time.Millisecond):
		}
	}
	time.Sleep(50 * time.Millisecond)
	check("while the waiter waited for the turn")
	l.give()
	for {
		if since, _ := l.state(); !since.Before(asked) {
			break // confirmed in a round of its own
		}
		select {
		case r := <-acquired:
			t.Fatalf("Acquire returned while the key was held: %v", r.err)
		case <-ctx.Done():
			t.Fatal("the waiter's keepalive was never confirmed once it had the turn")
		case <-time.After(time.Millisecond):
		}
	}
	if _, err := d.cli.Delete(ctx, holder); err != nil {
		t.Fatal(err)
	}
	r := <-acquired
	if r.err != nil {
		t.Fatalf("Acquire once the holder's entry was deleted: %v", r.err)
	}
	if err := d.Release(ctx, r.h); err != nil {
		t.Fatalf("Release: %v", err)
	}
}
