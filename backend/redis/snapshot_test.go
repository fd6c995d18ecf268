package redis

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A server restarted from a snapshot older than its last acquisitions
// comes back with a counter that is present but behind the tokens it
// issued. The next token must still be greater than every one of them.
func TestTokensIncreaseAfterSnapshotRollback(t *testing.T) {
	srv := startTempServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := openMutex(ctx, t, srv.url()+"?prefix=snap", "k")
	admin := srv.client()
	fence := keyNames("snap", "k").fence

	lockUnlock := func() dlock.Token {
		t.Helper()
		// The first calls after a restart may find the pooled connections
		// dead before go-redis reconnects.
		for attempt := 0; ; attempt++ {
			err := m.Lock(ctx)
			if err == nil {
				break
			}
			if !errors.Is(err, dlock.ErrUnavailable) || attempt == 5 {
				t.Fatalf("Lock: %v", err)
			}
		}
		tok := m.Token()
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		return tok
	}

	saved := lockUnlock()
	if err := admin.Save(ctx).Err(); err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	issued := []dlock.Token{saved}
	for range 3 {
		issued = append(issued, lockUnlock())
	}
	// SHUTDOWN NOSAVE: the snapshot on disk is the one from before the
	// last three acquisitions. The reply is the connection closing.
	_ = admin.ShutdownNoSave(ctx).Err()
	srv.restart()
	if v, err := admin.Get(ctx, fence).Result(); err != nil || v != strconv.FormatUint(uint64(saved), 10) {
		t.Fatalf("counter after the restart %q (%v); want %d from the snapshot, or the test proves nothing", v, err, saved)
	}

	next := lockUnlock()
	t.Logf("tokens before the restart %v, after %d", issued, next)
	for _, tok := range issued {
		if next <= tok {
			t.Fatalf("token %d after the restart from the snapshot is not greater than %d issued before it (issued: %v)", next, tok, issued)
		}
	}
}
