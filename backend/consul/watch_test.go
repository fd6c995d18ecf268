package consul

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

// gatedTransport holds every blocking query (one with an index) until
// the test opens the gate, as a slow network would: the query then
// reaches the agent after the key has already changed more than once.
type gatedTransport struct {
	arrived chan struct{}
	gate    chan struct{}
	next    http.RoundTripper
}

func (g *gatedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Query().Get("index") != "" {
		select {
		case g.arrived <- struct{}{}:
		default:
		}
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return g.next.RoundTrip(r)
}

// watchFree watches key, free when the watch begins, and waits for the
// signal that says so; the watch is closed when the test ends.
func watchFree(ctx context.Context, t *testing.T, d *consulDriver, key string) driver.Watch {
	t.Helper()
	w, err := d.Watch(ctx, key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	select {
	case <-w.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("no signal for a key free when the watch began")
	}
	return w
}

// A hold taken and released while the watch's query is on its way leaves
// the key as free as it found it, with a later index; the watch must
// still signal (an Election's observer missed a leader this way).
func TestWatchSeesAHoldThatCameAndWent(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	open2 := func() *consulDriver {
		d, err := open(ctx, testURL(t, endpoint(t), "lockdelay=0s"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d.(*consulDriver)
	}
	watcher, holder := open2(), open2()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections) // no keep-alive goroutines left behind
	g := &gatedTransport{arrived: make(chan struct{}, 1), gate: make(chan struct{}), next: tr}
	t.Cleanup(func() {
		select {
		case <-g.gate:
		default:
			close(g.gate)
		}
	})
	cfg := api.DefaultConfig()
	u := testURL(t, endpoint(t), "")
	cfg.Address = u.Host
	cfg.HttpClient = &http.Client{Transport: g}
	bc, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	watcher.bc = bc

	key := testKey(t, "k")
	w := watchFree(ctx, t, watcher, key)
	select {
	case <-g.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch's blocking query never started")
	}
	h, err := holder.TryAcquire(ctx, driver.Request{Key: key, TTL: MinTTL, Owner: "a"})
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := holder.Release(ctx, h); err != nil {
		t.Fatalf("Release: %v", err)
	}
	close(g.gate)
	select {
	case _, ok := <-w.Changed():
		if !ok {
			t.Fatal("the watch broke instead of signalling")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a hold taken and released while the query was on its way was never signalled")
	}
}

// A hold that comes and goes while the watch's query blocks on the agent
// must end that query: Consul answers a blocking read of a missing key
// that is still missing after a change as no change, so a watch that read
// the key itself missed a Lock+Unlock faster than the query's rerun (an
// Election's observer missed a leader this way, about one announcement
// in sixty). Here the key is set and deleted in one transaction, which
// such a watch never saw.
func TestWatchSeesAKeyCreatedAndDeletedWhileBlocked(t *testing.T) {
	ctx := ctxFor(t, 30*time.Second)
	d, err := open(ctx, testURL(t, endpoint(t), ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	watcher := d.(*consulDriver)
	c := newClient(t, endpoint(t))
	key := testKey(t, "k")
	path := watcher.path(key)
	w := watchFree(ctx, t, watcher, key)
	for round := range 3 {
		time.Sleep(300 * time.Millisecond) // the query is blocking on the agent
		ok, _, _, err := c.Txn().Txn(api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVSet, Key: path, Value: []byte("came")}},
			{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: path}},
		}, nil)
		if err != nil || !ok {
			t.Fatalf("round %d: set and delete in one transaction: %v, %v", round, ok, err)
		}
		select {
		case _, ok := <-w.Changed():
			if !ok {
				t.Fatalf("round %d: the watch broke instead of signalling", round)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: a key set and deleted while the query blocked was never signalled", round)
		}
	}
}
