package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// Unlock cancels the watchdog's renewal in flight and waits for it. The
// renewal's reply is let come, so its connection is kept for the release:
// pgx breaks the connection of a cancelled statement, and over a slow link
// the release then waited for a new connection, arriving after the lease
// had run out (an Unlock inside its window reported the hold lost).
func TestCancelledRenewalKeepsItsConnection(t *testing.T) {
	e := newEnv(t)
	e.driver(t) // create the table directly, not through the proxy
	p := newDropProxy(t, e.serverAddr(t))
	ctx := testenv.Context(t, time.Minute)
	d, err := openRaw(ctx, e.via(t, p.addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	h, err := d.TryAcquire(ctx, req("k", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The pool opens its minimum of connections in the background.
	for d.pool.Stat().TotalConns() < DefaultMinConns {
		if ctx.Err() != nil {
			t.Fatalf("the pool never opened %d connections", DefaultMinConns)
		}
		time.Sleep(10 * time.Millisecond)
	}
	opened := d.pool.Stat().NewConnsCount()

	p.block() // the renewal is sent and held on its way
	rctx, cancel := context.WithCancel(ctx)
	renewed := make(chan error, 1)
	go func() {
		_, err := d.Renew(rctx, h)
		renewed <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel() // as Unlock does to the renewal in flight
	time.Sleep(100 * time.Millisecond)
	p.unblock()
	if err := <-renewed; err != nil {
		t.Fatalf("a renewal cancelled with its statement on the way: %v; want its reply (nil)", err)
	}
	if err := d.Release(ctx, h); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// A broken connection is replaced by the pool's health check half a
	// second after it is closed.
	time.Sleep(1500 * time.Millisecond)
	if n := d.pool.Stat().NewConnsCount() - opened; n != 0 {
		t.Fatalf("%d connection(s) opened after the cancelled renewal: its connection was broken", n)
	}
}

// lingering ends at the parent's deadline at the latest (the grace after a
// cancellation is linger.After's, tested there).
func TestLingering(t *testing.T) {
	dl, cancelDL := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelDL()
	l, stop := lingering(dl, time.Hour)
	defer stop()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("outlived its parent's deadline")
	}
	if got, _ := l.Deadline(); got.IsZero() {
		t.Fatal("lost its parent's deadline")
	}
}
