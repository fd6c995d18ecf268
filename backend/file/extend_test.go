package file

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// heldKey is a new driver on a directory of its own and a hold of key.
func heldKey(tb testing.TB, key string, ttl time.Duration) (*fileDriver, driver.Hold) {
	tb.Helper()
	d := newDriver(tb.TempDir())
	tb.Cleanup(func() { _ = d.Close() })
	h, err := d.TryAcquire(context.Background(), driver.Request{Key: key, TTL: ttl, Owner: "0123456789abcdef0123456789abcdef", Meta: "host=a pid=1"})
	if err != nil {
		tb.Fatal(err)
	}
	return d, h
}

// A renewal changes the expires digits of the state file and nothing
// else: same length, same bytes outside them, a later expiry.
func TestRenewWritesOnlyExpires(t *testing.T) {
	d, h := heldKey(t, "jobs/nightly", time.Second)
	ctx := context.Background()
	path := h.State.(holdState).path
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h.TTL = time.Hour
	if _, err := d.Renew(ctx, h); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("renewal changed the file's length: %d -> %d", len(before), len(after))
	}
	if !bytes.Equal(before[:expiresAt], after[:expiresAt]) || !bytes.Equal(before[expiresAt+20:], after[expiresAt+20:]) {
		t.Fatalf("renewal changed more than the expires digits:\n%s\n---\n%s", before, after)
	}
	s0, err := parseState(before)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := parseState(after)
	if err != nil {
		t.Fatal(err)
	}
	if s1.expires-s0.expires < int64(30*time.Minute) {
		t.Fatalf("expires %d -> %d: the renewal to an hour did not move it", s0.expires, s1.expires)
	}
	s1.expires = s0.expires
	if s1 != s0 {
		t.Fatalf("state %+v after the renewal, %+v before", s1, s0)
	}
	// The longer lease holds: another owner is refused after the first
	// TTL would have run out.
	time.Sleep(1100 * time.Millisecond)
	if _, err := d.TryAcquire(ctx, driver.Request{Key: "jobs/nightly", TTL: time.Second, Owner: "other"}); !errors.Is(err, driver.ErrNotAcquired) {
		t.Fatalf("acquire of a renewed key: %v; want ErrNotAcquired", err)
	}
}

// A v1 file (written before hold metadata) has another layout: its
// renewal goes through the full rewrite and leaves a v2 file.
func TestRenewV1File(t *testing.T) {
	d, h := heldKey(t, "k", time.Minute)
	ctx := context.Background()
	path := h.State.(holdState).path
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseState(b)
	if err != nil {
		t.Fatal(err)
	}
	v1 := bytes.Replace(s.encode(), []byte(header), []byte(headerV1), 1)
	v1 = v1[:bytes.Index(v1, []byte("meta "))]
	if err := os.WriteFile(path, v1, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, ok := parseHead(v1); ok {
		t.Fatal("parseHead accepted a v1 file")
	}
	h.TTL = time.Hour
	if _, err := d.Renew(ctx, h); err != nil {
		t.Fatalf("renewal of a v1 file: %v", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := parseState(after)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(after, []byte(header+"\n")) || s1.owner != s.owner || s1.token != s.token || s1.expires-s.expires < int64(30*time.Minute) {
		t.Fatalf("v1 file after the renewal: %+v\n%s", s1, after)
	}
}

// parseHead takes only a whole v2 head; anything else is left to the full
// parser.
func TestParseHead(t *testing.T) {
	full := (&state{token: 7, expires: 1234, owner: "abc", key: "k", meta: "m"}).encode()
	if s, ok := parseHead(full); !ok || s.token != 7 || s.expires != 1234 || s.owner != "abc" {
		t.Fatalf("parseHead(v2 file) = %+v, %v", s, ok)
	}
	for name, b := range map[string][]byte{
		"empty":              nil,
		"cut in the owner":   full[:expiresAt+30],
		"cut in the expires": full[:expiresAt+5],
		"v1":                 bytes.Replace(full, []byte(header), []byte(headerV1), 1),
		"short expires":      bytes.Replace(full, []byte("expires 00000000000000001234"), []byte("expires 1234"), 1),
		"fields swapped":     bytes.Replace(full, []byte("token   "), []byte("tokens  "), 1),
	} {
		if _, ok := parseHead(b); ok {
			t.Errorf("parseHead accepted %s", name)
		}
	}
}

// A renewal allocates little: it reads the head of the file, not all of
// it (the metadata line alone is padded to some 4 KiB).
func TestRenewAllocatesLittle(t *testing.T) {
	d, h := heldKey(t, "k", time.Minute)
	ctx := context.Background()
	const n = 200
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		if _, err := d.Renew(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	if per := (m1.TotalAlloc - m0.TotalAlloc) / n; per > 1024 {
		t.Fatalf("%d B allocated per renewal; want at most 1 KiB (a full read and rewrite of the file takes some 15 KiB)", per)
	}
}

// BenchmarkRenew is one renewal of a held key: open, flock, read the
// head, write the expires digits, close.
//
//	go test -run '^$' -bench Renew -benchmem ./backend/file/
func BenchmarkRenew(b *testing.B) {
	d, h := heldKey(b, "k", time.Minute)
	ctx := context.Background()
	for b.Loop() {
		if _, err := d.Renew(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
}
