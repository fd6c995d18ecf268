package etcdfence_test

import (
	"errors"
	"math"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd/etcdfence"
	"github.com/dlock-go/dlock/fence"
)

func newEtcdFence(t *testing.T) (*etcdfence.Checker, *clientv3.Client, string) {
	t.Helper()
	c := openEtcd(t)
	base := unique(t, "dlock-fence-test") + "/"
	cleanEtcd(t, c, base)
	e, err := etcdfence.New(c, base+"fence/")
	if err != nil {
		t.Fatal(err)
	}
	return e, c, base + "data/"
}

func TestEtcdStaleWriteAndRead(t *testing.T) {
	e, c, data := newEtcdFence(t)
	ctx := testCtx(t)
	const t1, t2 = dlock.Token(40), dlock.Token(41)
	key := data + "cart"

	// A fresh fence key (missing) accepts any token.
	resp, err := e.Do(ctx, "cart", t2, clientv3.OpPut(key, "two"), clientv3.OpGet(key))
	if err != nil {
		t.Fatalf("t2's write: %v", err)
	}
	if len(resp.Responses) != 2 || string(resp.Responses[1].GetResponseRange().Kvs[0].Value) != "two" {
		t.Fatalf("responses = %v, want the Put's and the Get's", resp.Responses)
	}
	_, err = e.Do(ctx, "cart", t1, clientv3.OpPut(key, "one"))
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Token != t1 || se.Highest != t2 {
		t.Fatalf("t1's write after t2's: got %v, want StaleError{40, 41}", err)
	}
	if _, err := e.Do(ctx, "cart", t1, clientv3.OpGet(key)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("t1's read: got %v, want ErrStale", err)
	}
	got, err := c.Get(ctx, key)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "two" {
		t.Fatalf("value = %v, %v: the stale write landed", got.Kvs, err)
	}
	// Equal token again, then a newer holder's read shuts t2 out.
	if _, err := e.Do(ctx, "cart", t2, clientv3.OpPut(key, "two again")); err != nil {
		t.Fatalf("equal token: %v", err)
	}
	if _, err := e.Do(ctx, "cart", t2+1, clientv3.OpGet(key)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, "cart", t2, clientv3.OpPut(key, "late")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write after a newer read: got %v, want ErrStale", err)
	}
	if h, err := e.Highest(ctx, "cart"); err != nil || h != t2+1 {
		t.Fatalf("Highest = %d, %v", h, err)
	}
	// Per-key independence.
	if _, err := e.Do(ctx, "other", 1); err != nil {
		t.Fatalf("token 1 on another key: %v", err)
	}
}

// TestEtcdLargeTokens: etcd compares values as bytes; the padded encoding
// keeps that numeric over the whole uint64 range (unpadded, "9" > "10").
func TestEtcdLargeTokens(t *testing.T) {
	e, _, _ := newEtcdFence(t)
	ctx := testCtx(t)
	steps := []struct {
		tok dlock.Token
		ok  bool
	}{
		{9, true}, {10, true}, {9, false},
		{math.MaxInt64 + 1, true}, {math.MaxInt64, false},
		{math.MaxUint64, true}, {math.MaxUint64 - 1, false}, {math.MaxUint64, true},
	}
	for _, s := range steps {
		_, err := e.Do(ctx, "k", s.tok)
		if s.ok && err != nil || !s.ok && !errors.Is(err, fence.ErrStale) {
			t.Fatalf("token %d: got %v, accepted wanted %v", s.tok, err, s.ok)
		}
	}
}

func TestEtcdBadInput(t *testing.T) {
	e, c, data := newEtcdFence(t)
	ctx := testCtx(t)
	if _, err := e.Do(ctx, "k", 0, clientv3.OpPut(data+"k", "v")); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("token 0: got %v, want ErrNoToken", err)
	}
	if _, err := e.Do(ctx, "", 1); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("empty key: got %v, want ErrInvalid", err)
	}
	if _, err := etcdfence.New(nil, ""); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("nil client: got %v", err)
	}
	if got, _ := c.Get(ctx, data+"k"); len(got.Kvs) != 0 {
		t.Error("token 0 wrote")
	}
	// An op on the fence key itself is etcd's error, and nothing is written.
	if _, err := e.Do(ctx, "k", 1, clientv3.OpPut(e.Key("k"), "x")); err == nil || errors.Is(err, fence.ErrStale) {
		t.Errorf("op on the fence key: got %v, want etcd's error", err)
	}
	if h, _ := e.Highest(ctx, "k"); h != 0 {
		t.Errorf("fence = %d after refused transactions", h)
	}
}

func TestEtcdConcurrent(t *testing.T) {
	e, c, data := newEtcdFence(t)
	ctx := testCtx(t)
	const goroutines, perG = 8, 15
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perG; i++ {
				tok := dlock.Token(1 + i*3 + g%5)
				_, err := e.Do(ctx, "c", tok, clientv3.OpPut(data+"c", fence.EncodeToken(tok)))
				if err != nil && !errors.Is(err, fence.ErrStale) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	h, err := e.Highest(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, data+"c")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != fence.EncodeToken(h) {
		t.Fatalf("fence %d, value %v (%v): a lower token's write landed last", h, got.Kvs, err)
	}
}

// TestEtcdTxnCreateRevision: the create-revision fence with etcd's own
// concurrency.Mutex. A holder whose key was deleted (lease lost, lock
// broken) can no longer write; the new holder can.
func TestEtcdTxnCreateRevision(t *testing.T) {
	_, c, data := newEtcdFence(t)
	ctx := testCtx(t)
	lockPrefix := data + "lock"
	s1, err := concurrency.NewSession(c, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := concurrency.NewSession(c, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	m1 := concurrency.NewMutex(s1, lockPrefix)
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	key1, rev1 := m1.Key(), m1.Header().Revision
	resp, err := etcdfence.Txn(ctx, c, key1, rev1).Then(clientv3.OpPut(data+"v", "one")).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("holder's own write: %v, succeeded %v", err, resp != nil && resp.Succeeded)
	}
	// Break m1's hold from outside, as an expired lease would.
	if _, err := s1.Client().Revoke(ctx, s1.Lease()); err != nil {
		t.Fatal(err)
	}
	m2 := concurrency.NewMutex(s2, lockPrefix)
	if err := m2.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err = etcdfence.Txn(ctx, c, key1, rev1).Then(clientv3.OpPut(data+"v", "stale")).Commit()
	if err != nil || resp.Succeeded {
		t.Fatalf("old holder's write after losing the lock: %v, succeeded %v", err, resp != nil && resp.Succeeded)
	}
	resp, err = c.Txn(ctx).If(etcdfence.Owner(m2.Key(), m2.Header().Revision), clientv3.Compare(clientv3.Version(data+"v"), ">", 0)).
		Then(clientv3.OpPut(data+"v", "two")).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("new holder's write: %v", err)
	}
	got, _ := c.Get(ctx, data+"v")
	if len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "two" {
		t.Fatalf("value = %v", got.Kvs)
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
