package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// The driver-level contract: what a driver promises beyond the portable
// Locker, checked on Harness.NewDriver's drivers. Every backend runs it,
// so that no backend tests it again.
//
//	DriverInterfaces   the optional interfaces conformance needs (Inspector, Recorder)
//	DriverRecord       the first value wins and is read again; ClearRecord only with it
//	DriverRecordKeys   every key has its own record; the keys and values Recorder refuses
//	DriverRecordRace   concurrent Records from separate drivers agree on one value
//	DriverClearRecordRace a clear removes only the value it read, never a later one
//	DriverRecordApart  a record is apart from its key's lock: acquire, release, break, expiry
//	DriverRecordClosed a cancelled context and a closed driver change nothing
//	DriverRenewBatch   each of RenewBatch's answers is its own hold's
//	DriverOwnerChecked a late renewal changes nothing, where the driver declares it

func (s *suite) driverCases() []namedCase {
	return []namedCase{
		{"DriverInterfaces", s.driverInterfaces},
		{"DriverRecord", s.driverRecord},
		{"DriverRecordKeys", s.driverRecordKeys},
		{"DriverRecordRace", s.driverRecordRace},
		{"DriverClearRecordRace", s.driverClearRecordRace},
		{"DriverRecordApart", s.driverRecordApart},
		{"DriverRecordClosed", s.driverRecordClosed},
		{"DriverRenewBatch", s.driverRenewBatch},
		{"DriverOwnerChecked", s.driverOwnerChecked},
	}
}

// driver makes a driver with Harness.NewDriver, closed when the test ends.
func (s *suite) driver(t testing.TB) driver.Locker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.h.NewDriver(ctx)
	if err != nil {
		t.Fatalf("NewDriver: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// recorder is s.driver as the Recorder every driver must be.
func (s *suite) recorder(t testing.TB) (driver.Locker, driver.Recorder) {
	t.Helper()
	d := s.driver(t)
	r, ok := d.(driver.Recorder)
	if !ok {
		t.Fatalf("the driver (%T) is not a driver.Recorder: dlock.Semaphore needs it", d)
	}
	return d, r
}

// inspector is d as the Inspector every driver must be.
func inspector(t testing.TB, d driver.Locker) driver.Inspector {
	t.Helper()
	in, ok := d.(driver.Inspector)
	if !ok {
		t.Fatalf("the driver (%T) is not a driver.Inspector: Locker.Inspect and Break need it", d)
	}
	return in
}

// owner is an Owner of 32 hex digits, unique to this run and i.
func (s *suite) owner(i int) string {
	return fmt.Sprintf("%012s%020x", s.run, i)
}

// clearAfter clears key's record value when the test ends: records never
// expire, and the servers are shared.
func clearAfter(t testing.TB, r driver.Recorder, key, value string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = r.ClearRecord(ctx, key, value)
	})
}

func mustRecord(t testing.TB, r driver.Recorder, key, value, want string) {
	t.Helper()
	got, err := r.Record(ctxFor(t, slack+10*time.Second), key, value)
	if err != nil || got != want {
		t.Fatalf("Record(%.40q, %q) = %q, %v; want %q", key, value, got, err, want)
	}
}

func mustClear(t testing.TB, r driver.Recorder, key, value string, want bool) {
	t.Helper()
	got, err := r.ClearRecord(ctxFor(t, slack+10*time.Second), key, value)
	if err != nil || got != want {
		t.Fatalf("ClearRecord(%.40q, %q) = %v, %v; want %v", key, value, got, err, want)
	}
}

// The driver implements what conformance and the portable layer need
// of every backend: Inspector (Locker.Inspect and Break) and Recorder
// (Semaphore). The others are optional; this case says which it has.
func (s *suite) driverInterfaces(t *testing.T) {
	d := s.driver(t)
	var missing []string
	if _, ok := d.(driver.Inspector); !ok {
		missing = append(missing, "driver.Inspector")
	}
	if _, ok := d.(driver.Recorder); !ok {
		missing = append(missing, "driver.Recorder")
	}
	if len(missing) > 0 {
		t.Fatalf("the driver (%T) lacks %s, which every backend must implement", d, strings.Join(missing, " and "))
	}
	var has []string
	for _, o := range []struct {
		name string
		ok   bool
	}{
		{"Acquirer", is[driver.Acquirer](d)},
		{"LockWatcher", is[driver.LockWatcher](d)},
		{"Limiter", is[driver.Limiter](d)},
		{"BatchRenewer", is[driver.BatchRenewer](d)},
		{"OwnerCheckedRenewer", is[driver.OwnerCheckedRenewer](d)},
		{"LossNotifier", is[driver.LossNotifier](d)},
	} {
		if o.ok {
			has = append(has, o.name)
		}
	}
	t.Logf("%T implements Inspector, Recorder and %s", d, strings.Join(has, ", "))
}

func is[T any](d driver.Locker) bool {
	_, ok := d.(T)
	return ok
}

// The first value recorded wins: it is returned to the caller that wrote
// it, to every later caller whatever value it brings, and to another
// driver as well. ClearRecord deletes the record only when given its value
// and reports whether it did; afterwards a new value can be recorded.
func (s *suite) driverRecord(t *testing.T) {
	_, r := s.recorder(t)
	_, other := s.recorder(t)
	key := s.key(t, "sem")
	clearAfter(t, r, key, "permits=9")
	clearAfter(t, r, key, "permits=3")

	mustClear(t, r, key, "permits=3", false) // nothing there yet
	mustRecord(t, r, key, "permits=3", "permits=3")
	mustRecord(t, r, key, "permits=3", "permits=3")
	mustRecord(t, r, key, "permits=5", "permits=3")
	mustRecord(t, other, key, "permits=5", "permits=3")

	mustClear(t, r, key, "permits=4", false)
	mustRecord(t, other, key, "permits=5", "permits=3")
	mustClear(t, other, key, "permits=3", true)
	mustClear(t, r, key, "permits=3", false)
	mustRecord(t, r, key, "permits=9", "permits=9")
	mustRecord(t, other, key, "permits=3", "permits=9")
}

// Keys with odd bytes, and keys that differ only in them, have records of
// their own; the longest key and the longest value are accepted, and what
// driver.CheckRecord refuses is refused with ErrInvalidKey or
// ErrInvalidOption, recording nothing.
func (s *suite) driverRecordKeys(t *testing.T) {
	_, r := s.recorder(t)
	base := s.key(t, "")
	suffixes := []string{"a/b", "a", "a/", "A", ".", "..", "/", "//", "ключ", "{", "}", "{}", "a{b}c", "%7B", "%2F", "\x00nul", "\x00\xff", "x:lock", "x:record", "sp ace"}
	keys := make([]string, 0, len(suffixes)+2)
	for _, k := range suffixes {
		keys = append(keys, base+k)
	}
	long := base + strings.Repeat("k", driver.MaxKeyLen-len(base))
	keys = append(keys, long, base+strings.Repeat("/", driver.MaxKeyLen-len(base)))
	value := func(i int) string { return fmt.Sprintf("v%d\x00", i) } // a NUL is valid UTF-8
	for i, k := range keys {
		clearAfter(t, r, k, value(i))
		mustRecord(t, r, k, value(i), value(i))
	}
	for i, k := range keys {
		mustRecord(t, r, k, "other", value(i))
	}
	longValue := strings.Repeat("é", driver.MaxRecordLen/2)
	lk := s.key(t, "long-value")
	clearAfter(t, r, lk, longValue)
	mustRecord(t, r, lk, longValue, longValue)

	ctx := ctxFor(t, slack)
	for _, k := range []string{"", long + "k"} {
		if _, err := r.Record(ctx, k, "v"); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("Record with a key of %d bytes: %v; want ErrInvalidKey", len(k), err)
		}
		if _, err := r.ClearRecord(ctx, k, "v"); !errors.Is(err, driver.ErrInvalidKey) {
			t.Errorf("ClearRecord with a key of %d bytes: %v; want ErrInvalidKey", len(k), err)
		}
	}
	bad := s.key(t, "bad-value")
	for _, v := range []string{"", strings.Repeat("v", driver.MaxRecordLen+1), "\xff"} {
		if _, err := r.Record(ctx, bad, v); !errors.Is(err, driver.ErrInvalidOption) {
			t.Errorf("Record of a value of %d bytes (%q...): %v; want ErrInvalidOption", len(v), v[:min(len(v), 4)], err)
		}
		if _, err := r.ClearRecord(ctx, bad, v); !errors.Is(err, driver.ErrInvalidOption) {
			t.Errorf("ClearRecord of a value of %d bytes: %v; want ErrInvalidOption", len(v), err)
		}
	}
	clearAfter(t, r, bad, "good")
	mustRecord(t, r, bad, "good", "good")
	for i, k := range keys {
		mustClear(t, r, k, value(i), true)
	}
}

// Concurrent Records of different values from separate drivers (each with
// its own connections) all return one value, the one later calls read;
// a call may instead fail with ErrUnavailable when no value won (a
// Redlock split with no majority), but not every round may split.
func (s *suite) driverRecordRace(t *testing.T) {
	const n = 5
	rs := make([]driver.Recorder, n)
	for i := range rs {
		_, rs[i] = s.recorder(t)
	}
	agreed := 0
	for round := range 5 {
		key := s.key(t, fmt.Sprint(round))
		for i := range n {
			clearAfter(t, rs[0], key, fmt.Sprintf("permits=%d", i+1))
		}
		got := make([]string, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, r := range rs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), slack+10*time.Second)
				defer cancel()
				got[i], errs[i] = r.Record(ctx, key, fmt.Sprintf("permits=%d", i+1))
			}()
		}
		close(start)
		wg.Wait()
		won := ""
		for i := range got {
			switch {
			case errs[i] != nil:
				if !errors.Is(errs[i], driver.ErrUnavailable) {
					t.Fatalf("round %d: caller %d: %v; want a value or ErrUnavailable", round, i, errs[i])
				}
			case !strings.HasPrefix(got[i], "permits="):
				t.Fatalf("round %d: caller %d got %q", round, i, got[i])
			case won == "":
				won = got[i]
			case got[i] != won:
				t.Fatalf("round %d: callers got %q and %q", round, won, got[i])
			}
		}
		if won == "" {
			t.Logf("round %d: no value won (%v)", round, errs[0])
			continue
		}
		agreed++
		mustRecord(t, rs[n-1], key, "permits=0", won)
	}
	if agreed == 0 {
		t.Fatal("no round had a value win")
	}
}

// Concurrent clears of one value and a Record of another, from separate
// drivers: a clear reports the deletion, and a clear removes only the
// value it read, never one recorded after it.
func (s *suite) driverClearRecordRace(t *testing.T) {
	var rs [3]driver.Recorder
	for i := range rs {
		_, rs[i] = s.recorder(t)
	}
	for round := range 20 {
		key := s.key(t, fmt.Sprint(round))
		clearAfter(t, rs[0], key, "b")
		mustRecord(t, rs[0], key, "a", "a")
		ctx, cancel := context.WithTimeout(context.Background(), slack+10*time.Second)
		var wg sync.WaitGroup
		var cleared [2]bool
		var errs [3]error
		var recorded string
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cleared[i], errs[i] = rs[i].ClearRecord(ctx, key, "a")
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, err := rs[2].Record(ctx, key, "b")
				if err != nil || v == "b" {
					recorded, errs[2] = v, err
					return
				}
			}
		}()
		wg.Wait()
		cancel()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if !cleared[0] && !cleared[1] {
			t.Fatalf("round %d: neither clear reported the deletion", round)
		}
		mustRecord(t, rs[0], key, "c", recorded)
	}
}

// A key's record is apart from the key's lock: a record does not stop
// the key from being acquired, Inspect does not see it, and acquiring,
// releasing, breaking and the expiry of a lease leave it as it was.
func (s *suite) driverRecordApart(t *testing.T) {
	t.Parallel() // waits out a lease
	d, r := s.recorder(t)
	in := inspector(t, d)
	key := s.key(t, "sem")
	const val = "permits=2"
	clearAfter(t, r, key, val)
	mustRecord(t, r, key, val, val)
	ctx := ctxFor(t, 4*s.h.ttl()+s.h.ExpiryGrace+3*slack)
	if info, err := in.Inspect(ctx, key); err != nil || info.Held {
		t.Fatalf("Inspect with only a record: %+v, %v; want free", info, err)
	}
	ttl := s.h.ttl()
	h, err := d.TryAcquire(ctx, driver.Request{Key: key, TTL: ttl, Owner: s.owner(1)})
	if err != nil {
		t.Fatalf("TryAcquire of a key with a record: %v", err)
	}
	mustRecord(t, r, key, "permits=8", val)
	if info, err := in.Inspect(ctx, key); err != nil || !info.Held || info.Token != h.Token {
		t.Fatalf("Inspect while held: %+v, %v; want held with token %d", info, err, h.Token)
	}
	if err := d.Release(ctx, h); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustRecord(t, r, key, "permits=8", val)

	if _, err = d.TryAcquire(ctx, driver.Request{Key: key, TTL: ttl, Owner: s.owner(2)}); err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if info, err := in.Break(ctx, key); err != nil || !info.Held {
		t.Fatalf("Break: %+v, %v; want the hold removed", info, err)
	}
	mustRecord(t, r, key, "permits=8", val)

	// A holder that goes away without a release: its lease expires, or
	// its session ends.
	gone := s.driver(t)
	if _, err = gone.TryAcquire(ctx, driver.Request{Key: key, TTL: ttl, Owner: s.owner(3)}); err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	_ = gone.Close()
	deadline := time.Now().Add(2*ttl + s.h.ExpiryGrace + slack)
	for {
		info, err := in.Inspect(ctx, key)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if !info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease of %v of a closed driver still held at %+v", ttl, info)
		}
		time.Sleep(ttl / 10)
	}
	mustRecord(t, r, key, "permits=8", val)
	mustClear(t, r, key, val, true)
}

// A cancelled context fails Record and ClearRecord with context.Canceled;
// after Close they fail with ErrClosed; neither changes the record.
func (s *suite) driverRecordClosed(t *testing.T) {
	d, r := s.recorder(t)
	_, other := s.recorder(t)
	key := s.key(t, "x")
	clearAfter(t, other, key, "permits=2")
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Record(dead, key, "permits=1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Record with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := r.ClearRecord(dead, key, "permits=1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ClearRecord with a cancelled context: %v; want context.Canceled", err)
	}
	mustRecord(t, r, key, "permits=2", "permits=2")
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := ctxFor(t, slack)
	if _, err := r.Record(ctx, key, "permits=1"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Record after Close: %v; want ErrClosed", err)
	}
	if _, err := r.ClearRecord(ctx, key, "permits=2"); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("ClearRecord after Close: %v; want ErrClosed", err)
	}
	mustRecord(t, other, key, "permits=3", "permits=2")
}

// RenewBatch answers each hold as Renew would have answered it alone: of
// holds renewed together, one released by its owner, one broken from
// outside, and one broken and taken by another owner are refused with
// ErrNotHeld or ErrLockLost, the others are renewed, and the other
// owner's hold is left as it was. A driver without driver.BatchRenewer
// is held to the same by Renew, one hold at a time.
func (s *suite) driverRenewBatch(t *testing.T) {
	d := s.driver(t)
	taker := s.driver(t)
	in := inspector(t, d)
	ctx := ctxFor(t, 2*s.h.longTTL()+slack)
	ttl := s.h.longTTL()
	const n = 8
	hs := make([]driver.Hold, n)
	for i := range hs {
		h, err := d.TryAcquire(ctx, driver.Request{Key: s.key(t, fmt.Sprint(i)), TTL: ttl, Owner: s.owner(i)})
		if err != nil {
			t.Fatalf("TryAcquire of key %d: %v", i, err)
		}
		hs[i] = h
	}
	t.Cleanup(func() {
		for _, h := range hs {
			_ = d.Release(context.Background(), h)
		}
	})
	// Hold 1: released. Hold 2: broken. Hold 3: broken and taken over.
	if err := d.Release(ctx, hs[1]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Broken by another driver's Inspector, as an operator would: the
	// Harness's BreakLease may end a lease or session every hold of d
	// shares.
	for _, i := range []int{2, 3} {
		if info, err := inspector(t, taker).Break(ctx, s.key(t, fmt.Sprint(i))); err != nil || !info.Held {
			t.Fatalf("Break of key %d: %+v, %v", i, info, err)
		}
	}
	// The driver may learn of a broken hold asynchronously (a watch, a
	// session event); the taker's acquire must not wait for that.
	var takenOver driver.Hold
	deadline := time.Now().Add(slack + s.h.ExpiryGrace)
	for {
		h, err := taker.TryAcquire(ctx, driver.Request{Key: s.key(t, "3"), TTL: ttl, Owner: s.owner(100)})
		if err == nil {
			takenOver = h
			break
		}
		if !errors.Is(err, driver.ErrNotAcquired) || time.Now().After(deadline) {
			t.Fatalf("TryAcquire of a broken key by another owner: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(func() { _ = taker.Release(context.Background(), takenOver) })
	before, err := in.Inspect(ctx, s.key(t, "3"))
	if err != nil || !before.Held || before.Token != takenOver.Token {
		t.Fatalf("Inspect of the key taken over: %+v, %v; want held with token %d", before, err, takenOver.Token)
	}

	var ttls []time.Duration
	var errs []error
	if br, ok := d.(driver.BatchRenewer); ok {
		ttls, errs = br.RenewBatch(ctx, hs)
		if len(ttls) != n || len(errs) != n {
			t.Fatalf("RenewBatch answered %d TTLs and %d errors for %d holds", len(ttls), len(errs), n)
		}
	} else {
		t.Logf("%T is no driver.BatchRenewer: each hold renewed alone", d)
		ttls, errs = make([]time.Duration, n), make([]error, n)
		for i, h := range hs {
			ttls[i], errs[i] = d.Renew(ctx, h)
		}
	}
	for i := range hs {
		switch i {
		case 1, 2, 3:
			if !errors.Is(errs[i], driver.ErrNotHeld) && !errors.Is(errs[i], driver.ErrLockLost) {
				t.Errorf("hold %d (released, broken, taken over): %v; want ErrNotHeld or ErrLockLost", i, errs[i])
			}
		default:
			if errs[i] != nil || ttls[i] <= 0 {
				t.Errorf("hold %d: ttl %v, err %v; want renewed", i, ttls[i], errs[i])
			}
		}
	}
	for i := range hs {
		info, err := in.Inspect(ctx, s.key(t, fmt.Sprint(i)))
		if err != nil {
			t.Fatalf("Inspect of key %d: %v", i, err)
		}
		switch i {
		case 1, 2:
			if info.Held {
				t.Errorf("key %d (released, broken) is held after RenewBatch: %+v", i, info)
			}
		case 3:
			if !info.Held || info.Token != takenOver.Token {
				t.Errorf("key taken over: %+v after RenewBatch; want still the other owner's, token %d", info, takenOver.Token)
			}
			if info.Remaining > before.Remaining+time.Second {
				t.Errorf("the other owner's lease grew from %v to %v", before.Remaining, info.Remaining)
			}
		default:
			if !info.Held || info.Token != hs[i].Token {
				t.Errorf("key %d: %+v after RenewBatch; want held with token %d", i, info, hs[i].Token)
			}
		}
	}
	// The other owner's hold is its own still.
	if _, err := taker.Renew(ctx, takenOver); err != nil {
		t.Fatalf("the other owner's Renew: %v", err)
	}
	if err := taker.Release(ctx, takenOver); err != nil {
		t.Fatalf("the other owner's Release: %v", err)
	}
}

// A driver that reports owner-checked renewals keeps that promise
// (CheckOwnerCheckedRenewals); one that does not need not.
func (s *suite) driverOwnerChecked(t *testing.T) {
	d := s.driver(t)
	if oc, ok := d.(driver.OwnerCheckedRenewer); !ok || !oc.OwnerCheckedRenewals() {
		t.Logf("%T does not report owner-checked renewals: nothing to check", d)
		return
	}
	t.Parallel() // waits out a lease
	CheckOwnerCheckedRenewals(t, d, s.key(t, "late"))
}
