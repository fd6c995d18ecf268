package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

func TestRecordFirstWins(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	if v, err := d.Record(ctx, "sem", "permits=3"); err != nil || v != "permits=3" {
		t.Fatalf("first Record = %q, %v; want permits=3", v, err)
	}
	if v, err := d.Record(ctx, "sem", "permits=5"); err != nil || v != "permits=3" {
		t.Fatalf("second Record = %q, %v; want the first value permits=3", v, err)
	}
	if v, err := e.driver(t).Record(ctx, "sem", "permits=7"); err != nil || v != "permits=3" {
		t.Fatalf("Record from another driver = %q, %v; want permits=3", v, err)
	}
	// The record table is named after the lease table, and holds no lease.
	var n int
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM `+e.names().recordsQ).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in %s: %d, %v; want 1", e.names().recordsQ, n, err)
	}
	if err := e.admin.QueryRow(ctx, `SELECT count(*) FROM `+e.names().tableQ).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows in the lease table: %d, %v; want 0", n, err)
	}
	// A Locker on another table has records of its own.
	other := newEnv(t)
	if v, err := other.driver(t).Record(ctx, "sem", "permits=9"); err != nil || v != "permits=9" {
		t.Fatalf("Record on another table = %q, %v; want permits=9", v, err)
	}
}

// Drivers with pools of their own, racing on a key whose record table does
// not exist yet and then on fresh keys, all get one value.
func TestRecordRace(t *testing.T) {
	e := newEnv(t)
	ctx := testenv.Context(t, 2*time.Minute)
	const n = 6
	ds := make([]*pgDriver, n)
	for i := range ds {
		ds[i] = e.driver(t)
	}
	for round := 0; round < 10; round++ {
		key := fmt.Sprintf("race-%d", round)
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range ds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				got[i], errs[i] = ds[i].Record(ctx, key, fmt.Sprintf("permits=%d", i+1))
			}()
		}
		close(start)
		wg.Wait()
		for i := range got {
			if errs[i] != nil {
				t.Fatalf("round %d caller %d: %v", round, i, errs[i])
			}
			if got[i] != got[0] {
				t.Fatalf("round %d: callers got %q; want one value for all", round, got)
			}
		}
	}
}

func TestClearRecord(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); ok || err != nil {
		t.Fatalf("ClearRecord before any record table = %v, %v; want false, nil", ok, err)
	}
	if _, err := d.Record(ctx, "sem", "permits=3"); err != nil {
		t.Fatal(err)
	}
	if ok, err := d.ClearRecord(ctx, "sem", "permits=4"); ok || err != nil {
		t.Fatalf("ClearRecord with a wrong value = %v, %v; want false, nil", ok, err)
	}
	if v, err := d.Record(ctx, "sem", "permits=9"); err != nil || v != "permits=3" {
		t.Fatalf("after a wrong clear Record = %q, %v; want permits=3 kept", v, err)
	}
	if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); !ok || err != nil {
		t.Fatalf("ClearRecord with the value = %v, %v; want true, nil", ok, err)
	}
	if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); ok || err != nil {
		t.Fatalf("second ClearRecord = %v, %v; want false, nil", ok, err)
	}
	if v, err := d.Record(ctx, "sem", "permits=9"); err != nil || v != "permits=9" {
		t.Fatalf("Record after the clear = %q, %v; want the new value permits=9", v, err)
	}
}

func TestRecordApartFromLock(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	const key = "sem"
	if _, err := d.Record(ctx, key, "permits=2"); err != nil {
		t.Fatal(err)
	}
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect of a recorded key = %+v, %v; want free", info, err)
	}
	h, err := d.TryAcquire(ctx, req(key, time.Minute))
	if err != nil {
		t.Fatalf("TryAcquire of a recorded key: %v", err)
	}
	if err := d.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(ctx, req(key, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if info, err := d.Break(ctx, key); err != nil || !info.Held {
		t.Fatalf("Break = %+v, %v", info, err)
	}
	if _, err := d.TryAcquire(ctx, req(key, 10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the lease runs out
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect after expiry = %+v, %v; want free", info, err)
	}
	if v, err := d.Record(ctx, key, "permits=5"); err != nil || v != "permits=2" {
		t.Fatalf("Record after lock, unlock, break and expiry = %q, %v; want permits=2", v, err)
	}
}

func TestRecordKeys(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx := testenv.Context(t, time.Minute)
	keys := []string{"a/b", "..", ".", "ключ", "\x00\xff", strings.Repeat("k", driver.MaxKeyLen), strings.Repeat("j", driver.MaxKeyLen)}
	for i, k := range keys {
		v := fmt.Sprintf("permits=%d\x00", i) // a NUL is valid UTF-8
		if got, err := d.Record(ctx, k, v); err != nil || got != v {
			t.Fatalf("Record(%.20q) = %q, %v; want %q", k, got, err, v)
		}
	}
	for i, k := range keys {
		v := fmt.Sprintf("permits=%d\x00", i)
		if got, err := d.Record(ctx, k, "other"); err != nil || got != v {
			t.Fatalf("second Record(%.20q) = %q, %v; want %q", k, got, err, v)
		}
	}
	for _, k := range []string{"", strings.Repeat("k", driver.MaxKeyLen+1)} {
		if _, err := d.Record(ctx, k, "v"); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("Record of a %d-byte key: %v; want ErrInvalidKey", len(k), err)
		}
		if _, err := d.ClearRecord(ctx, k, "v"); !errors.Is(err, dlock.ErrInvalidKey) {
			t.Errorf("ClearRecord of a %d-byte key: %v; want ErrInvalidKey", len(k), err)
		}
	}
	for _, v := range []string{"", "\xff", strings.Repeat("v", driver.MaxRecordLen+1)} {
		if _, err := d.Record(ctx, "k", v); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("Record of value %.10q: %v; want ErrInvalidOption", v, err)
		}
	}
}

func TestRecordContextAndClose(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, context.Canceled) {
		t.Errorf("Record on a cancelled context: %v", err)
	}
	if _, err := d.ClearRecord(ctx, "k", "v"); !errors.Is(err, context.Canceled) {
		t.Errorf("ClearRecord on a cancelled context: %v", err)
	}
	d.Close()
	if _, err := d.Record(context.Background(), "k", "v"); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("Record after Close: %v", err)
	}
	if _, err := d.ClearRecord(context.Background(), "k", "v"); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("ClearRecord after Close: %v", err)
	}
}

// A server that cannot be reached is ErrUnavailable for both calls.
func TestRecordUnavailable(t *testing.T) {
	e := newEnv(t)
	e.driver(t) // create the lease table directly, not through the proxy
	p := newDropProxy(t, e.serverAddr(t))
	d, err := openRaw(testenv.Context(t, 30*time.Second), e.via(t, p.addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ctx := testenv.Context(t, time.Minute)
	if _, err := d.Record(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	p.drop()
	if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Record with the connections dropped: %v; want ErrUnavailable", err)
	}
	if _, err := d.ClearRecord(ctx, "k", "v"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("ClearRecord with the connections dropped: %v; want ErrUnavailable", err)
	}
}
