// Package movetest runs a move from one backend to another through its
// configurations, for the tests of each pair of stores: the tokens a key's
// holders present must strictly increase across C0, C1, the commit and C2.
package movetest

import (
	"context"
	"net/url"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/move"
)

// C1 is the URL of the move's first configuration.
func C1(from, to string) string {
	return "move:?from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
}

// C2 is the URL of the move's last configuration.
func C2(to string) string { return "move:?to=" + url.QueryEscape(to) }

// Open opens raw, closed at the end of the test.
func Open(t testing.TB, raw string, opts ...dlock.Option) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(context.Background(), raw, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", raw, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// Commit commits the move from from to to.
func Commit(t testing.TB, from, to string) move.Record {
	t.Helper()
	ctx := context.Background()
	x, err := dlock.OpenDriver(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	y, err := dlock.OpenDriver(ctx, to)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	r, _, err := move.Commit(ctx, x, y, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ClearCommit(t, to, r) })
	return r
}

// ClearCommit removes the commit record r from to, so that a store
// shared by several test runs is not left committed.
func ClearCommit(t testing.TB, to string, r move.Record) {
	ctx := context.Background()
	y, err := dlock.OpenDriver(ctx, to)
	if err != nil {
		t.Errorf("clearing the commit: %v", err)
		return
	}
	defer y.Close()
	if _, err := y.(driver.Recorder).ClearRecord(ctx, move.CommitKey, r.String()); err != nil {
		t.Errorf("clearing the commit: %v", err)
	}
}

// sequence checks that a key's tokens strictly increase.
type sequence struct {
	t    testing.TB
	last map[string]dlock.Token
	who  map[string]string
}

// take locks key through l, checks its token against the key's last, and
// returns the Mutex, still held.
func (s *sequence) take(name string, l *dlock.Locker, key string) *dlock.Mutex {
	s.t.Helper()
	ctx := context.Background()
	m, err := l.NewMutex(key)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		s.t.Fatalf("%s Lock(%s): %v", name, key, err)
	}
	tok := m.Token()
	if tok <= s.last[key] {
		s.t.Fatalf("%s took %s with token %d, not above %d presented by %s before it", name, key, tok, s.last[key], s.who[key])
	}
	s.last[key], s.who[key] = tok, name
	info, err := l.Inspect(ctx, key)
	if err != nil || !info.Held || info.Token != tok {
		s.t.Fatalf("%s Inspect(%s) while holding token %d: %+v, %v", name, key, tok, info, err)
	}
	return m
}

func (s *sequence) cycle(name string, l *dlock.Locker, key string) {
	s.t.Helper()
	m := s.take(name, l, key)
	if err := m.Unlock(context.Background()); err != nil {
		s.t.Fatalf("%s Unlock(%s): %v", name, key, err)
	}
}

// RunTokens moves keys from from to to, through every configuration, with
// holders of each configuration interleaved, and fails the test if a
// key's tokens do not strictly increase, or if Inspect through the
// configuration in use reports another token than the holder's.
func RunTokens(t *testing.T, from, to, prefix string, opts ...dlock.Option) {
	s := &sequence{t: t, last: map[string]dlock.Token{}, who: map[string]string{}}
	c0 := Open(t, from, opts...)
	c1a := Open(t, C1(from, to), opts...)
	c1b := Open(t, C1(from, to), opts...)
	keyC1 := prefix + "c1-first" // first taken after the commit by C1
	keyC2 := prefix + "c2-first" // first taken after the commit by C2
	keyHeld := prefix + "held"   // held by C1 across the commit
	keyFresh := prefix + "fresh" // never taken before the commit
	for range 3 {
		for _, k := range []string{keyC1, keyC2, keyHeld} {
			s.cycle("C0", c0, k)
			s.cycle("C1a", c1a, k)
			s.cycle("C1b", c1b, k)
		}
	}
	held := s.take("C1a", c1a, keyHeld)
	// Every C0 instance is gone: commit.
	_ = c0.Close()
	r := Commit(t, from, to)
	if uint64(r.OG) <= uint64(s.last[keyHeld]) {
		t.Fatalf("commit ceiling %d not above the token %d X issued before it", r.OG, s.last[keyHeld])
	}
	c2 := Open(t, C2(to), opts...)
	if err := held.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.cycle("C2", c2, keyHeld)
	s.cycle("C1b", c1b, keyHeld)
	s.cycle("C1b", c1b, keyC1)
	s.cycle("C2", c2, keyC2)
	s.cycle("C2", c2, keyFresh)
	for range 3 {
		for _, k := range []string{keyC1, keyC2, keyHeld, keyFresh} {
			s.cycle("C1a", c1a, k)
			s.cycle("C2", c2, k)
			s.cycle("C1b", c1b, k)
		}
	}
	// Every C1 instance is gone: C2 alone goes on.
	_ = c1a.Close()
	_ = c1b.Close()
	c2b := Open(t, C2(to), opts...)
	for _, k := range []string{keyC1, keyC2, keyHeld, keyFresh} {
		s.cycle("C2", c2, k)
		s.cycle("C2b", c2b, k)
	}
}
