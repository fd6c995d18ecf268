package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// unescape inverts nodeName; it fails the test on anything nodeName cannot
// have produced.
func unescape(t *testing.T, name string) string {
	t.Helper()
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		if name[i] != '%' {
			b.WriteByte(name[i])
			continue
		}
		if i+2 >= len(name) {
			t.Fatalf("truncated escape in %q", name)
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			t.Fatalf("bad escape in %q: %v", name, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String()
}

func TestNodeNameIsInjectiveAndValid(t *testing.T) {
	keys := []string{
		"a/b", "a_b", "a%2Fb", "a%2fb", "a-b", "a.b", "a:b", "a\\b", "a//b", "a/", "/a",
		"with space", "with+plus", "ключ-鍵-🔒", strings.Repeat("k", 4096),
		".", "..", "*", "?x=1", "#frag", "\x00nul", "\ttab", "zookeeper", "\xff\xfe", "%", "%25",
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		b := make([]byte, 1+r.IntN(12))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		keys = append(keys, string(b))
	}
	seen := map[string]string{}
	for _, k := range keys {
		n := nodeName(k)
		if prev, dup := seen[n]; dup && prev != k {
			t.Fatalf("keys %q and %q share the name %q", prev, k, n)
		}
		seen[n] = k
		if got := unescape(t, n); got != k {
			t.Fatalf("nodeName(%q) = %q, which decodes to %q", k, n, got)
		}
		if n == "" || n == "." || n == ".." {
			t.Fatalf("nodeName(%q) = %q", k, n)
		}
		for i := 0; i < len(n); i++ {
			c := n[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '%') {
				t.Fatalf("nodeName(%q) = %q contains %q", k, n, c)
			}
		}
	}
}

func TestSeqOf(t *testing.T) {
	for name, want := range map[string]int64{
		"_c_0123456789abcdef0123456789abcdef-lock-0000000042":     42,
		"_c_6f1b3a9e-5a6b-4c1e-9d8f-0b1c2d3e4f50-lock-0000000007": 7, // Curator
		"lock-0000000001": 1,
		"lock-2147483648": 2147483648,
	} {
		if got, ok := seqOf(name); !ok || got != want {
			t.Errorf("seqOf(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "lock-", "lock-12", "foo", "_c_x-lock-00000000zz"} {
		if _, ok := seqOf(name); ok {
			t.Errorf("seqOf(%q) ok; want not a lock node", name)
		}
	}
}

func TestCleanPrefix(t *testing.T) {
	for in, want := range map[string]string{"": DefaultPrefix, "/": DefaultPrefix, "/a": "/a", "/a/b/": "/a/b", "/é": "/é"} {
		if got, err := cleanPrefix(in); err != nil || got != want {
			t.Errorf("cleanPrefix(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a", "//", "/a//b", "/.", "/a/..", "/a\x01", "/zookeeper", "/zookeeper/x"} {
		if got, err := cleanPrefix(in); err == nil {
			t.Errorf("cleanPrefix(%q) = %q; want an error", in, got)
		}
	}
}

// The longest keys, of bytes that each take three characters to escape,
// are valid and distinct znodes on a real server.
func TestLongestKeys(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "session_timeout=2s")
	_, l1 := lockerOn(t, raw)
	_, l2 := lockerOn(t, raw)
	keys := []string{
		strings.Repeat("é", driver.MaxKeyLen/2),
		strings.Repeat("\x00", driver.MaxKeyLen),
		strings.Repeat("/", driver.MaxKeyLen),
		strings.Repeat("/", driver.MaxKeyLen-1) + ".",
	}
	ctx := context.Background()
	var held []*dlock.Mutex
	for _, k := range keys {
		m, err := l1.NewMutex(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.TryLock(ctx); err != nil {
			t.Fatalf("TryLock(%d-byte key %q...): %v", len(k), k[:8], err)
		}
		held = append(held, m)
	}
	for _, m := range held {
		p, _ := l2.NewMutex(m.Key())
		if err := p.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock through another Locker while held: %v; want ErrNotAcquired", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// ZooKeeper's sequence suffix is a signed 32-bit counter: after 2^31
// changes under one key node it reads "-2147483648" and counts up from
// there. The queue keeps creation order across the wrap, so a wrapped node
// never sorts ahead of the nodes created before it.
func TestQueueAcrossSequenceWrap(t *testing.T) {
	name := func(guid byte, seq string) string {
		return fmt.Sprintf("_c_%032x-lock-%s", guid, seq)
	}
	for _, c := range []struct {
		names []string // in creation order
	}{
		{[]string{name(1, "0000000007"), name(2, "0000000008"), name(3, "0000000010")}},
		{[]string{name(1, "2147483646"), name(2, "2147483647"), name(3, "-2147483648"), name(4, "-2147483647")}},
		{[]string{name(1, "2147483647"), name(2, "-2147483646"), name(3, "-000000005")}},
		{[]string{name(1, "2147483640"), name(2, "-2147483648")}},
		{[]string{name(1, "-2147483648"), name(2, "-2147483640"), name(3, "0000000003")}}, // past the wrap
		{[]string{name(1, "-000000002"), name(2, "-000000001"), name(3, "0000000000"), name(4, "0000000001")}},
	} {
		for shift := range c.names { // the server lists children in any order
			in := append(append([]string(nil), c.names[shift:]...), c.names[:shift]...)
			var got []string
			for _, n := range queue(in) {
				got = append(got, n.name)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.names) {
				t.Errorf("queue(%v) = %v; want creation order %v", in, got, c.names)
			}
		}
	}
}
