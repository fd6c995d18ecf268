package file_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// TokenCeiling reads the state files only. It read every file of the
// directory, and a waiting Lock's doorbell is a named pipe, whose open
// for reading waits for a writer: lockctl move commit on a file:// store
// hung for as long as Locks waited in line (fault scenario 21, file →
// redis).
func TestTokenCeilingWithLocksInLine(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	ms := mutexes(t, dir, "k", 3, dlock.WithTTL(time.Minute)) // a holder, two in line
	if err := ms[0].Lock(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	l, err := dlock.Open(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 1; i <= 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := ms[i].Lock(wctx); err == nil {
				_ = ms[i].Unlock(ctx)
			}
		}()
		waitWaiters(t, ms[0], l, i)
	}
	d, err := dlock.OpenDriver(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	type result struct {
		c   uint64
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := d.(driver.TokenCeiling).TokenCeiling(ctx)
		got <- result{c, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("TokenCeiling: %v", r.err)
		}
		if tok := uint64(ms[0].Token()); r.c < tok {
			t.Fatalf("TokenCeiling %d, below the holder's token %d", r.c, tok)
		}
	case <-time.After(30 * time.Second): // bounds a hang; it returns at once
		t.Fatal("TokenCeiling did not return with two Locks waiting in line")
	}
	if err := ms[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
