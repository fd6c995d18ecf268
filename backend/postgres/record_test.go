package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// The record is a row of the records table named after the lease table,
// holding no lease; a Locker on another table has records of its own.
func TestRecordLayout(t *testing.T) {
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
