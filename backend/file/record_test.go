package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

func recordCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestRecordFirstWins(t *testing.T) {
	ctx := recordCtx(t)
	d := newDriver(t.TempDir())
	defer d.Close()
	if v, err := d.Record(ctx, "sem", "permits=3"); err != nil || v != "permits=3" {
		t.Fatalf("first Record = %q, %v; want permits=3", v, err)
	}
	if v, err := d.Record(ctx, "sem", "permits=5"); err != nil || v != "permits=3" {
		t.Fatalf("second Record = %q, %v; want the first value permits=3", v, err)
	}
	// Another driver (another process's view) sees the same record.
	d2 := newDriver(d.dir)
	defer d2.Close()
	if v, err := d2.Record(ctx, "sem", "permits=7"); err != nil || v != "permits=3" {
		t.Fatalf("Record from another driver = %q, %v; want permits=3", v, err)
	}
}

func TestRecordRace(t *testing.T) {
	ctx := recordCtx(t)
	dir := t.TempDir()
	for round := 0; round < 20; round++ {
		key := fmt.Sprintf("race-%d", round)
		const n = 8
		got := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := newDriver(dir)
				defer d.Close()
				<-start
				got[i], errs[i] = d.Record(ctx, key, fmt.Sprintf("permits=%d", i+1))
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
	// No temporary file is left behind.
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestClearRecord(t *testing.T) {
	ctx := recordCtx(t)
	d := newDriver(t.TempDir())
	defer d.Close()
	if ok, err := d.ClearRecord(ctx, "sem", "permits=3"); ok || err != nil {
		t.Fatalf("ClearRecord of no record = %v, %v; want false, nil", ok, err)
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

// Concurrent clears of one value and records of another, from separate
// drivers: a clear removes only the value it read, never one recorded
// after its read.
func TestClearRecordRace(t *testing.T) {
	ctx := recordCtx(t)
	dir := t.TempDir()
	ds := []*fileDriver{newDriver(dir), newDriver(dir), newDriver(dir)}
	for _, d := range ds {
		defer d.Close()
	}
	for round := 0; round < 200; round++ {
		key := fmt.Sprintf("k%d", round)
		if _, err := ds[0].Record(ctx, key, "a"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var cleared [2]bool
		var errs [3]error
		var recorded string
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cleared[i], errs[i] = ds[i].ClearRecord(ctx, key, "a")
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, err := ds[2].Record(ctx, key, "b")
				if err != nil || v == "b" {
					recorded, errs[2] = v, err
					return
				}
			}
		}()
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if cleared[0] == cleared[1] {
			t.Fatalf("round %d: clears reported %v; want exactly one", round, cleared)
		}
		if v, err := ds[0].Record(ctx, key, "c"); err != nil || v != recorded {
			t.Fatalf("round %d: record after the race = %q, %v; want %q, untouched by the clears", round, v, err, recorded)
		}
	}
}

func TestRecordApartFromLock(t *testing.T) {
	ctx := recordCtx(t)
	d := newDriver(t.TempDir())
	defer d.Close()
	const key = "sem"
	if _, err := d.Record(ctx, key, "permits=2"); err != nil {
		t.Fatal(err)
	}
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect of a recorded key = %+v, %v; want free", info, err)
	}
	req := driver.Request{Key: key, TTL: time.Minute, Owner: strings.Repeat("a", 32)}
	h, err := d.TryAcquire(ctx, req)
	if err != nil {
		t.Fatalf("TryAcquire of a recorded key: %v", err)
	}
	if err := d.Release(ctx, h); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TryAcquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	if info, err := d.Break(ctx, key); err != nil || !info.Held {
		t.Fatalf("Break = %+v, %v", info, err)
	}
	req.TTL = 10 * time.Millisecond
	if _, err := d.TryAcquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // the hold expires
	if info, err := d.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect after expiry = %+v, %v; want free", info, err)
	}
	if v, err := d.Record(ctx, key, "permits=5"); err != nil || v != "permits=2" {
		t.Fatalf("Record after lock, unlock, break and expiry = %q, %v; want permits=2", v, err)
	}
	// Neither name can be the other's, for any key.
	for _, k := range []string{key, "r", "k-x", "a/b", strings.Repeat("k", 4096)} {
		for _, k2 := range []string{key, "r", "k-x", "a/b", strings.Repeat("k", 4096)} {
			if recordName(k) == fileName(k2) {
				t.Fatalf("record of %q and state file of %q share %q", k, k2, recordName(k))
			}
		}
	}
}

func TestRecordKeys(t *testing.T) {
	ctx := recordCtx(t)
	d := newDriver(t.TempDir())
	defer d.Close()
	keys := []string{"a/b", "..", ".", "ключ", "\x00\xff", "%2F", strings.Repeat("k", driver.MaxKeyLen), strings.Repeat("j", driver.MaxKeyLen)}
	for i, k := range keys {
		v := fmt.Sprintf("permits=%d", i)
		if got, err := d.Record(ctx, k, v); err != nil || got != v {
			t.Fatalf("Record(%.20q) = %q, %v; want %q", k, got, err, v)
		}
	}
	for i, k := range keys {
		v := fmt.Sprintf("permits=%d", i)
		if got, err := d.Record(ctx, k, "other"); err != nil || got != v {
			t.Fatalf("second Record(%.20q) = %q, %v; want %q (keys share a record?)", k, got, err, v)
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
	d := newDriver(t.TempDir())
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

// A record file that is not ours is an error, not a value.
func TestRecordCorrupt(t *testing.T) {
	ctx := recordCtx(t)
	d := newDriver(t.TempDir())
	defer d.Close()
	if err := os.WriteFile(d.recordPath("k"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Record(ctx, "k", "v"); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("Record over a corrupt file: %v; want ErrUnavailable", err)
	}
}
