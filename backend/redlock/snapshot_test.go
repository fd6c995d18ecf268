package redlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Every master restarted from a snapshot older than the last acquisitions:
// each comes back with a counter that is present but behind the tokens
// issued, so quorum intersection cannot help. The next token must still be
// greater than every one of them.
func TestFaultSnapshotRollback(t *testing.T) {
	m := privateMasters(t)
	l, _ := m.locker(t, dlock.WithTTL(10*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mx, err := l.NewMutex("snap")
	if err != nil {
		t.Fatal(err)
	}
	lockUnlock := func() dlock.Token {
		t.Helper()
		// Right after the restart the pooled connections may be dead.
		for attempt := 0; ; attempt++ {
			err := mx.Lock(ctx)
			if err == nil {
				break
			}
			if !errors.Is(err, dlock.ErrUnavailable) || attempt == 5 {
				t.Fatalf("Lock: %v", err)
			}
		}
		tok := mx.Token()
		if err := mx.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		return tok
	}

	issued := []dlock.Token{lockUnlock()}
	admin := adminClients(t, m.addrs)
	for i, c := range admin {
		if err := c.Save(ctx).Err(); err != nil {
			t.Fatalf("SAVE on %s: %v", m.nodes[i], err)
		}
	}
	for range 3 {
		issued = append(issued, lockUnlock())
	}
	// Killed: nothing newer than the snapshot reaches the disk.
	for i := range m.nodes {
		m.down(t, i)
	}
	for i := range m.nodes {
		m.up(t, i)
	}
	counters := 0
	for _, c := range admin {
		if n, _ := c.DBSize(ctx).Result(); n > 0 {
			counters++
		}
	}
	if counters < len(admin) {
		t.Fatalf("%d of %d masters came back with their snapshot: the test would prove nothing", counters, len(admin))
	}

	next := lockUnlock()
	t.Logf("tokens before the restart %v, after %d", issued, next)
	for _, tok := range issued {
		if next <= tok {
			t.Fatalf("token %d after the restart from the snapshot is not greater than %d issued before it (issued: %v)", next, tok, issued)
		}
	}
}
