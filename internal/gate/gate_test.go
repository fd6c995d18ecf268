package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/gate"
)

// A gate of n admits n turns; the next waits until one is given up, or
// ends with its context's error or ErrClosed. Leave and Again are
// idempotent.
func TestGate(t *testing.T) {
	g := gate.New(2)
	ctx := context.Background()
	a, err := g.Enter(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Enter(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Again(ctx, nil); err != nil { // held: no second turn
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.Enter(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third Enter on a full gate: %v; want the context's error", err)
	}
	closed := make(chan struct{})
	close(closed)
	if _, err := g.Enter(ctx, closed); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Enter on a full gate, closed: %v; want ErrClosed", err)
	}
	entered := make(chan error, 1)
	go func() {
		c, err := g.Enter(ctx, nil)
		if err == nil {
			c.Leave()
		}
		entered <- err
	}()
	a.Leave()
	a.Leave() // a second Leave frees nothing more
	if err := <-entered; err != nil {
		t.Fatalf("Enter after a Leave: %v", err)
	}
	if err := a.Again(ctx, nil); err != nil {
		t.Fatalf("Again: %v", err)
	}
	if n := len(g); n != 2 {
		t.Fatalf("%d turns held; want 2 (a and b)", n)
	}
	a.Leave()
	b.Leave()
	if n := len(g); n != 0 {
		t.Fatalf("%d turns held after both left; want 0", n)
	}
}
