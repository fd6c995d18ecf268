package redlock_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// goroutinesCreated is the number of goroutines this process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// flushers counts the goroutines that send an instance's pipelines.
func flushers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "redlock.(*batcher).flush(")
}

// The goroutines that send an instance's pipelines outlive an empty queue
// for a while and take the next requests: a loop of Lock+Unlock starts no
// goroutine per request (it started one per instance for every acquire
// and every release, each growing its stack inside go-redis again). They
// end with the Driver.
func TestFlushersWaitForTheNextRequest(t *testing.T) {
	d := openDriver(t, withParams(t, endpoint(t), "prefix", testPrefix()))
	l, err := dlock.NewLocker(d)
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.NewMutex("flushers")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cycle := func() {
		t.Helper()
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 { // connections, the inbox subscription
		cycle()
	}
	const cycles = 100
	before := goroutinesCreated()
	for range cycles {
		cycle()
	}
	created := goroutinesCreated() - before
	t.Logf("%d goroutines started in %d cycles", created, cycles)
	// Each cycle sends every one of the 5 instances an acquire and a
	// release: 10 flusher starts per cycle when each request starts one.
	if created >= cycles*5 {
		t.Errorf("%d goroutines started in %d uncontended Lock+Unlock; want fewer than one per instance and cycle (%d)", created, cycles, cycles*5)
	}
	if n := flushers(); n == 0 {
		t.Error("no flusher is left waiting for the next request after a Lock+Unlock")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for them to leave flush; their last lines may still be
	// on the stack for a moment.
	for deadline := time.Now().Add(time.Second); flushers() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d flushers still run a second after Close", flushers())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
