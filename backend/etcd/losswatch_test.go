package etcd_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/dlock-go/dlock"
)

// deleteEventCounter returns a client config whose watch streams count the
// deletion events they receive.
func deleteEventCounter(e *env) (clientv3.Config, *atomic.Int64) {
	n := new(atomic.Int64)
	cfg := e.cfg
	cfg.DialOptions = append(cfg.DialOptions,
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || method != "/etcdserverpb.Watch/Watch" {
				return s, err
			}
			return &countingStream{ClientStream: s, deletes: n}, nil
		}))
	return cfg, n
}

type countingStream struct {
	grpc.ClientStream
	deletes *atomic.Int64
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if wr, ok := m.(*etcdserverpb.WatchResponse); ok && err == nil {
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				s.deletes.Add(1)
			}
		}
	}
	return err
}

// A Locker's loss watch covers its whole prefix, so it receives the
// deletion of every other Locker's entries too: kept from the first hold
// until Close, it cost each of N processes contending for a key an event
// per handoff (and the server N per acquisition). It now runs only while a
// hold that has lasted lazyWatch needs it, and stops a second after the
// last one. Here a Locker holds a key briefly, then long (the watch starts,
// and reports an entry deleted from outside), then none; another Locker's
// releases must then reach it no more.
func TestLossWatchRunsOnlyWhileHoldsNeedIt(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := context.Background()
	cfg, deletes := deleteEventCounter(e)
	a := e.lockerOn(t, cfg, dlock.WithTTL(30*time.Second))
	b := e.mustLocker(t)
	cycles := func(n int) {
		t.Helper()
		m, err := b.NewMutex("other")
		if err != nil {
			t.Fatal(err)
		}
		for range n {
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}

	short, _ := a.NewMutex("short")
	if err := short.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := short.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Even a slow machine that let the short hold outlast lazyWatch has
	// stopped the watch by now.
	time.Sleep(1500 * time.Millisecond)
	before := deletes.Load()
	cycles(30)
	time.Sleep(200 * time.Millisecond)
	if got := deletes.Load() - before; got != 0 {
		t.Fatalf("after a short hold, another Locker's 30 releases reached this Locker as %d deletion events; want none", got)
	}

	// A long hold: the watch starts and reports a deletion from outside.
	long, _ := a.NewMutex("long")
	if err := long.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	resp, err := e.holder(ctx, "long")
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("reading the long hold's entry: %v, %d entries", err, len(resp.Kvs))
	}
	if _, err := e.admin.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-long.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a hold whose entry was deleted from outside was not lost")
	}
	if deletes.Load() == before {
		t.Fatal("the long hold's loss was not seen by a watch")
	}

	time.Sleep(1500 * time.Millisecond)
	before = deletes.Load()
	cycles(30)
	time.Sleep(200 * time.Millisecond)
	if got := deletes.Load() - before; got != 0 {
		t.Fatalf("a second after the last hold ended, another Locker's 30 releases reached this Locker as %d deletion events; want none", got)
	}
}

// Holds that each end within lazyWatch never start the loss watch: a
// Release tells such a hold of a loss. The watch used to start whenever
// some hold was registered lazyWatch after the first one, which in a tight
// loop of short holds is most of the time, and then streamed the Locker every
// deletion under its prefix, its own releases included. A round counts
// only when every hold, from Lock called to Unlock returned, took less than
// lazyWatch (20ms): a stalled machine may hold one longer, and then the
// watch may rightly start, so the round runs again after it stopped.
func TestShortHoldsStartNoLossWatch(t *testing.T) {
	e := newEnv(t, "DLOCK_ETCD_URL")
	ctx := context.Background()
	cfg, deletes := deleteEventCounter(e)
	l := e.lockerOn(t, cfg, dlock.WithTTL(30*time.Second))
	m, _ := l.NewMutex("busy")
	const lazyWatch = 20 * time.Millisecond
	// The first Lock also grants the Locker's lease.
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Ten holds a round, so that on a loaded machine some round still
	// runs without a slow one.
	const rounds, holds = 30, 10
	for round := range rounds {
		if round > 0 {
			time.Sleep(1500 * time.Millisecond) // a watch the last round started has stopped
		}
		before := deletes.Load()
		var longest time.Duration
		n := 0
		for ; n < holds; n++ {
			start := time.Now()
			if err := m.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Millisecond) // held most of the time, each time briefly
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			longest = max(longest, time.Since(start))
		}
		time.Sleep(100 * time.Millisecond)
		if longest >= lazyWatch {
			t.Logf("round %d: a Lock+Unlock took %v; running the round again", round, longest)
			continue
		}
		if got := deletes.Load() - before; got != 0 {
			t.Fatalf("%d Lock+Unlock, none over %v, reached the Locker as %d deletion events: a loss watch ran; want none", n, longest, got)
		}
		return
	}
	t.Fatalf("no round of %d holds ran without a Lock+Unlock taking %v or more", holds, lazyWatch)
}

// An entry deleted before the lazily started loss watch runs is still
// reported: the watch starts from the hold's creation.
func TestLossBeforeTheLossWatchStarts(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			e := newEnv(t, tp.envVar)
			ctx := context.Background()
			l := e.mustLocker(t, dlock.WithTTL(30*time.Second))
			for i := range 5 {
				m, _ := l.NewMutex("early")
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				resp, err := e.holder(ctx, "early")
				if err != nil || len(resp.Kvs) == 0 {
					t.Fatalf("reading the entry: %v", err)
				}
				if _, err := e.admin.Delete(ctx, string(resp.Kvs[0].Key)); err != nil {
					t.Fatal(err)
				}
				select {
				case <-m.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("round %d: a hold whose entry was deleted at once was not lost", i)
				}
				if err := m.Unlock(ctx); err == nil {
					t.Fatalf("round %d: Unlock of a lost hold succeeded", i)
				}
				// Let the watch stop, so that the next round starts
				// without one.
				time.Sleep(1200 * time.Millisecond)
			}
		})
	}
}
