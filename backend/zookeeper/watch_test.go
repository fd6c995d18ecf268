package zookeeper

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The driver's Watch (for callers that loop over TryAcquire) fires on a
// change to the key's queue, also for a key whose znode does not exist yet,
// and keeps firing after the first change.
func TestWatchFiresOnQueueChanges(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=2s")
	d, _ := lockerOn(t, raw)
	_, l := lockerOn(t, raw)
	key := fmt.Sprintf("watch/%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := d.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []func(context.Context) error{m.Lock, m.Unlock, m.Lock, m.Unlock} {
		if err := step(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case _, ok := <-w.Changed():
			if !ok {
				t.Fatalf("step %d: watch broke", i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("step %d: no change reported", i)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
