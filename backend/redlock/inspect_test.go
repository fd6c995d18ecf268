package redlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Inspect reports what a majority holds: a copy missing on a minority of
// instances still reads as held, on a majority as free. Break deletes the
// lock on every instance.
func TestInspectMajority(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw := endpoint(t)
	hosts := hostsOf(t, raw)
	admin := adminClients(t, hosts)
	prefix := testPrefix()
	open := func() *dlock.Locker {
		l, err := dlock.NewLocker(openDriver(t, withParams(t, raw, "prefix", prefix)), dlock.WithOwner("majority"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	l, op := open(), open()
	m, err := l.NewMutex("k", dlock.WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Lock returns once a majority granted it; wait for the others' late
	// grants so that the deletions below leave exactly what they say.
	everyGrant := func() {
		t.Helper()
		for i, c := range admin {
			for c.Exists(ctx, prefix+"l:k").Val() != 1 {
				if ctx.Err() != nil {
					t.Fatalf("instance %s never got the lock", hosts[i])
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	everyGrant()
	quorum := len(hosts)/2 + 1
	for i := 0; i < len(hosts)-quorum; i++ {
		admin[i].Del(ctx, prefix+"l:k")
	}
	info, err := op.Inspect(ctx, "k")
	if err != nil || !info.Held || info.Token != m.Token() || info.Owner != "majority" {
		t.Fatalf("Inspect with the lock on a bare majority: %+v, %v; want held with token %d", info, err, m.Token())
	}
	admin[len(hosts)-quorum].Del(ctx, prefix+"l:k")
	if info, err := op.Inspect(ctx, "k"); err != nil || info.Held {
		t.Fatalf("Inspect with the lock on a minority: %+v, %v; want free", info, err)
	}
	_ = m.Unlock(ctx)

	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// A grant still in flight when Break runs would land after its delete.
	everyGrant()
	if info, err := op.Break(ctx, "k"); err != nil || !info.Held || info.Token != m.Token() {
		t.Fatalf("Break: %+v, %v; want the hold with token %d", info, err, m.Token())
	}
	for i, c := range admin {
		if n := c.Exists(ctx, prefix+"l:k").Val(); n != 0 {
			t.Fatalf("instance %s still has the lock after Break", hosts[i])
		}
	}
}
