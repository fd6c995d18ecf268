package redis

import (
	"strings"
	"testing"
	"time"
)

// hashTag is the part of name Redis Cluster hashes: between the first '{'
// and the first '}' after it, when that is not empty.
func hashTag(name string) string {
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return name
	}
	j := strings.IndexByte(name[i+1:], '}')
	if j <= 0 {
		return name
	}
	return name[i+1 : i+1+j]
}

// Every string over an alphabet of the escape's own characters maps to a
// distinct name without braces, and the names of a key (its record's too)
// share the hash tag "prefix:escaped-key".
func TestKeyNamesInjective(t *testing.T) {
	alphabet := []string{"%", "{", "}", "7", "B", "D", "2", "5", "a", ":"}
	var keys []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		if prefix != "" {
			keys = append(keys, prefix)
		}
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 4)
	seen := map[string]string{}
	for _, k := range keys {
		e := escapeKey(k)
		if strings.ContainsAny(e, "{}") {
			t.Fatalf("escapeKey(%q) = %q contains a brace", k, e)
		}
		if prev, dup := seen[e]; dup && prev != k {
			t.Fatalf("keys %q and %q both escape to %q", prev, k, e)
		}
		seen[e] = k
		n := keyNames("p", k)
		tag := hashTag(n.lock)
		if tag != "p:"+e || hashTag(n.fence) != tag || hashTag(n.channel) != tag || hashTag(n.meta) != tag || hashTag(n.record) != tag {
			t.Fatalf("key %q: hash tags %q %q %q %q; want all p:%s", k, tag, hashTag(n.fence), hashTag(n.channel), hashTag(n.meta), e)
		}
	}
	if len(seen) < 1000 {
		t.Fatalf("only %d keys tried", len(seen))
	}
}

func TestLockKey(t *testing.T) {
	for key, want := range map[string]string{
		"orders/42":  "{dlock:orders/42}:lock",
		"a{b}c":      "{dlock:a%7Bb%7Dc}:lock",
		"100%":       "{dlock:100%25}:lock",
		"\x00nul":    "{dlock:\x00nul}:lock",
		"ключ":       "{dlock:ключ}:lock",
		"a%7Bb%7Dc":  "{dlock:a%257Bb%257Dc}:lock",
		"}":          "{dlock:%7D}:lock",
		"{":          "{dlock:%7B}:lock",
		"{}":         "{dlock:%7B%7D}:lock",
		"..":         "{dlock:..}:lock",
		"prefix:key": "{dlock:prefix:key}:lock",
	} {
		if got := LockKey(DefaultPrefix, key); got != want {
			t.Errorf("LockKey(%q) = %q; want %q", key, got, want)
		}
	}
}

func TestOptionsNormalize(t *testing.T) {
	o, err := Config{}.normalize()
	if err != nil || o.Prefix != DefaultPrefix || o.WaitTimeout != DefaultWaitTimeout {
		t.Fatalf("zero Config: %+v, %v", o, err)
	}
	for _, bad := range []Config{
		{Prefix: "a{"},
		{Prefix: "}"},
		{WaitReplicas: -1},
		{WaitTimeout: -time.Second},
	} {
		if _, err := bad.normalize(); err == nil {
			t.Errorf("Config %+v accepted", bad)
		}
	}
}
