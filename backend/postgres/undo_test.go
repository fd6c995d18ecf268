package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// An acquire whose reply is cut short is undone before TryAcquire
// returns: a caller that got an error holds nothing, and the key is free
// for the next client at once. The undo used to be a release in the
// background, which the next client could overtake (the conformance case
// CancelAtGrant saw it about once in thirty rounds). Here the statement
// runs and its reply is held on its way until after the caller's
// deadline, and new connections to the server are slow, as the
// background release's was: the other client asks at once.
func TestCutShortAcquireIsUndoneBeforeItReturns(t *testing.T) {
	e := newEnv(t)
	other := e.driver(t) // creates the table, directly
	p := newDropProxy(t, e.serverAddr(t))
	ctx := testenv.Context(t, time.Minute)
	d, err := openRaw(ctx, withParams(t, e.via(t, p.addr()), "pool_min_conns", "1", "pool_max_conns", "1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if n := d.pool.Stat().TotalConns(); n != 1 {
		t.Fatalf("the pool has %d connections; want 1, for the acquire to take", n)
	}

	// Prepare the statements on the connection: a first acquire would
	// wait for the reply to its preparation, and not run.
	warm, err := d.TryAcquire(ctx, req("warm", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, warm); err != nil {
		t.Fatal(err)
	}

	p.holdReplies() // the acquire runs; its reply waits in the proxy
	p.slowDials(50 * time.Millisecond)
	actx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = d.TryAcquire(actx, req("k", time.Minute))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryAcquire past its deadline: %v; want an error matching context.DeadlineExceeded", err)
	}
	h, err := other.TryAcquire(ctx, req("k", time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire by another client once the cut-short acquire returned an error: %v; want the key free", err)
	}
	if err := other.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
}

// A caller that gives up while its acquire's reply is on its way still
// gets the reply, within acquireGrace, and with it the hold: pgx breaks
// the connection of a cancelled statement, which left the outcome
// unknown, a lease to undo, and the pool a connection to make again.
func TestCancelledAcquireGetsItsReply(t *testing.T) {
	e := newEnv(t)
	e.driver(t) // create the table directly, not through the proxy
	p := newDropProxy(t, e.serverAddr(t))
	ctx := testenv.Context(t, time.Minute)
	d, err := openRaw(ctx, withParams(t, e.via(t, p.addr()), "pool_min_conns", "1", "pool_max_conns", "1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	warm, err := d.TryAcquire(ctx, req("warm", time.Minute)) // prepares the statements
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx, warm); err != nil {
		t.Fatal(err)
	}
	opened := d.pool.Stat().NewConnsCount()

	p.holdReplies()
	actx, cancel := context.WithCancel(ctx)
	type result struct {
		h   driver.Hold
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := d.TryAcquire(actx, req("k", time.Minute))
		got <- result{h, err}
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	time.Sleep(100 * time.Millisecond)
	p.releaseReplies()
	r := <-got
	if r.err != nil {
		t.Fatalf("TryAcquire cancelled with its reply on the way: %v; want the reply: the hold", r.err)
	}
	if err := d.Release(ctx, r.h); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := d.pool.Stat().NewConnsCount() - opened; n != 0 {
		t.Fatalf("%d connection(s) opened after the cancelled acquire: its connection was broken", n)
	}
}
