package file

import (
	"strings"
	"testing"
)

func TestFileNameInjective(t *testing.T) {
	keys := []string{
		"a/b", "a_b", "a%2Fb", "a%2fb", "a-b", "a.b", "a:b", "a\\b", "a//b", "a/", "/a",
		".", "..", "...", "\x00nul", "\ttab", "ключ", "A", "a", "%", "%25", "k-x", "h-x",
		strings.Repeat("k", 66), strings.Repeat("k", 67), strings.Repeat("k", 200), strings.Repeat("k", 201),
		strings.Repeat("/", 66), strings.Repeat("/", 67), strings.Repeat("k", 4096),
	}
	seen := map[string]string{}
	for _, k := range keys {
		n := fileName(k)
		if prev, dup := seen[n]; dup {
			t.Fatalf("keys %q and %q share the file name %q", prev, k, n)
		}
		seen[n] = k
		if len(n) > 255 || strings.ContainsAny(n, "/\x00") || n == "." || n == ".." {
			t.Fatalf("fileName(%q) = %q: not a valid file name", k, n)
		}
	}
	if got := fileName("jobs/nightly"); got != "k-jobs%2Fnightly.lock" {
		t.Errorf("fileName(jobs/nightly) = %q", got)
	}
	if got := fileName(strings.Repeat("k", 201)); !strings.HasPrefix(got, "h-") {
		t.Errorf("a 201-byte key gets %q; want a hashed name", got)
	}
}

func TestStateRoundTrip(t *testing.T) {
	for _, s := range []state{
		{},
		{token: 1745312345678901, expires: 1745312375678901234, owner: "0123456789abcdef0123456789abcdef", key: "a/b\x00"},
		{token: 7, key: "free"},
		{token: 9, expires: 5, owner: strings.Repeat("b", 32), key: "m", meta: "host=h pid=1 prog=p ü\n\x01"},
		{token: 9, expires: 5, owner: strings.Repeat("b", 32), key: "m", meta: strings.Repeat("\x01", 1024)},
	} {
		got, err := parseState(s.encode())
		if err != nil {
			t.Fatalf("parse(encode(%+v)): %v", s, err)
		}
		if got != s {
			t.Fatalf("round trip: %+v became %+v", s, got)
		}
	}
	held := state{token: 1, expires: 99, owner: strings.Repeat("a", 32), key: "k"}
	free := held
	free.owner, free.expires = "", 0
	if len(held.encode()) != len(free.encode()) {
		t.Fatal("a held and a free state of one key encode to different lengths")
	}
	// Metadata of any length and content keeps the length too.
	for _, meta := range []string{"x", strings.Repeat("\x01", 1024), strings.Repeat("\U0010FFFF", 256)} {
		withMeta := held
		withMeta.meta = meta
		if len(withMeta.encode()) != len(free.encode()) {
			t.Fatalf("a state with %d bytes of metadata encodes to %d bytes, a free one to %d", len(meta), len(withMeta.encode()), len(free.encode()))
		}
	}
	// A v1 file (before hold metadata) still reads.
	v1 := headerV1 + "\ntoken   00000000000000000003\nexpires 00000000000000000000\nowner   " + freeOwner + "\nkey     \"k\"\n"
	if s, err := parseState([]byte(v1)); err != nil || s.token != 3 || s.key != "k" {
		t.Fatalf("v1 file: %+v, %v", s, err)
	}
	if s, err := parseState(nil); err != nil || s != (state{}) {
		t.Fatalf("empty file: %+v, %v; want a key never held", s, err)
	}
	for _, bad := range []string{"garbage\n", header + "\ntoken x\n", header + "\ntoken 1\n", header + "\nweird 1\n"} {
		if _, err := parseState([]byte(bad)); err == nil {
			t.Errorf("parseState(%q) succeeded", bad)
		}
	}
}
