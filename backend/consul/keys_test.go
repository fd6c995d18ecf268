package consul

import (
	"strings"
	"testing"
)

var trickyKeys = []string{
	"a", "a/b", "a_b", "a%2Fb", "a%2fb", "a~2Fb", "a-b", "a.b", "a:b", "a\\b", "a//b", "a/", "/a", "/", "//",
	"with space", "with+plus", "ключ-鍵-🔒", ".", "..", "...", "./a", "a/.", "a/..", "a/../b", ".hidden",
	"*", "?x=1", "#frag", "\x00nul", "\ttab", "~", "~~", "~7E", "\xff\xfe", strings.Repeat("/", 10),
}

// checkPath fails unless p is a clean KV path: URL-safe characters only,
// no empty, "." or ".." segment, no leading or trailing slash.
func checkPath(t *testing.T, key, p string) {
	t.Helper()
	for i := 0; i < len(p); i++ {
		if c := p[i]; !plain(c) && c != '.' && c != '/' && c != '~' {
			t.Fatalf("encodeKey(%q) = %q: byte %q is not URL-safe", key, p, c)
		}
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			t.Fatalf("encodeKey(%q) = %q: segment %q", key, p, seg)
		}
	}
}

func TestEncodeKey(t *testing.T) {
	for key, want := range map[string]string{
		"jobs/nightly": "jobs/nightly",
		"a.b":          "a.b",
		"..":           "~2E.",
		"a/":           "a~2F",
		"a//b":         "a/~2Fb",
		"/a":           "~2Fa",
		"a b~":         "a~20b~7E",
		"\x00":         "~00",
	} {
		if got := encodeKey(key); got != want {
			t.Errorf("encodeKey(%q) = %q; want %q", key, got, want)
		}
	}
	seen := map[string]string{}
	for _, k := range append(trickyKeys, strings.Repeat("k", 1024), strings.Repeat("\x00", 4096)) {
		p := encodeKey(k)
		checkPath(t, k, p)
		if other, dup := seen[p]; dup {
			t.Fatalf("keys %q and %q both map to %q", other, k, p)
		}
		seen[p] = k
		back, ok := decodeKey(p)
		if !ok || back != k {
			t.Fatalf("decodeKey(encodeKey(%q)) = %q, %v", k, back, ok)
		}
	}
}

func TestDecodeKeyRejects(t *testing.T) {
	for _, p := range []string{"~", "~2", "~zz", "~2e", "a/", "~61", "/a"} {
		if k, ok := decodeKey(p); ok {
			t.Errorf("decodeKey(%q) = %q, true; want false: encodeKey never produces it", p, k)
		}
	}
}

// FuzzEncodeKey checks that encoding is injective (it can be decoded) and
// always yields a clean path.
func FuzzEncodeKey(f *testing.F) {
	for _, k := range trickyKeys {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if key == "" {
			return
		}
		p := encodeKey(key)
		checkPath(t, key, p)
		if back, ok := decodeKey(p); !ok || back != key {
			t.Fatalf("decodeKey(encodeKey(%q)) = %q, %v", key, back, ok)
		}
	})
}

func TestValidPrefix(t *testing.T) {
	for p, want := range map[string]bool{
		"dlock": true, "a/b.c/d-e_f": true, "": false, "a//b": false, "a/./b": false,
		"..": false, "a b": false, "a/~": false, "ключ": false,
	} {
		if got := validPrefix(p); got != want {
			t.Errorf("validPrefix(%q) = %v; want %v", p, got, want)
		}
	}
}
