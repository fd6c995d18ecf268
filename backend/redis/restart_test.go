package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A restart of a server without persistence loses the fencing counter;
// tokens issued afterwards must still be greater than every token before.
func TestTokensIncreaseAcrossRestart(t *testing.T) {
	srv := startTempServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := openMutex(ctx, t, srv.url()+"?prefix=restart", "k")
	var last dlock.Token
	for i := 0; i < 200; i++ {
		if err := m.Lock(ctx); err != nil {
			t.Fatalf("Lock: %v", err)
		}
		if m.Token() <= last {
			t.Fatalf("token %d after %d", m.Token(), last)
		}
		last = m.Token()
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	admin := srv.client()
	fence := keyNames("restart", "k").fence
	if n := admin.Exists(ctx, fence).Val(); n != 1 {
		t.Fatalf("counter %s missing before the restart", fence)
	}

	srv.restart()
	if n := admin.Exists(ctx, fence).Val(); n != 0 {
		t.Fatalf("counter %s survived the restart: the test would prove nothing", fence)
	}
	// The Locker's pooled connections died with the server; the first
	// calls may report that before go-redis reconnects.
	for attempt := 0; ; attempt++ {
		err := m.Lock(ctx)
		if err == nil {
			break
		}
		if !errors.Is(err, dlock.ErrUnavailable) || attempt == 5 {
			t.Fatalf("Lock after the restart: %v", err)
		}
	}
	t.Logf("last token before the restart %d, first after %d", last, m.Token())
	if m.Token() <= last {
		t.Fatalf("token %d after the restart is not greater than %d before it", m.Token(), last)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
