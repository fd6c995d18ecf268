package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

func nilSafeOpen(context.Context, *url.URL) (driver.Locker, error) { return nil, nil }

func TestOpenBadInput(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		url  string
		want error
		text string // part of the message
	}{
		{"nosuch://x", dlock.ErrInvalidURL, "mem"},
		{"://x", dlock.ErrInvalidURL, ""},
		{"mem", dlock.ErrInvalidURL, "no scheme"},
		{"%zz", dlock.ErrInvalidURL, ""},
		{"mem://?tll=5s", dlock.ErrInvalidURL, "tll"},
		{"mem://?ttl=abc", dlock.ErrInvalidURL, "ttl"},
		{"mem://?ttl=5s&ttl=6s", dlock.ErrInvalidURL, "2 times"},
		{"mem://?autorenew=maybe", dlock.ErrInvalidURL, "autorenew"},
		{"mem://?ttl=0s", dlock.ErrInvalidOption, "positive"},
		{"mem://?ttl=-1s", dlock.ErrInvalidOption, "positive"},
		{"mem://?ttl=1ns", dlock.ErrInvalidOption, "10ms"},
		// A bad parameter is a bad URL, whatever its cause.
		{"mem://?ttl=0s", dlock.ErrInvalidURL, "positive"},
		{"mem://?tll=5s", dlock.ErrInvalidURL, "(known: autorenew, maxhold, minhold, ttl)"},
		{"mem://x/path", dlock.ErrInvalidURL, "path"},
	} {
		l, err := dlock.Open(ctx, tc.url)
		if !errors.Is(err, tc.want) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("Open(%q) = %v; want %v", tc.url, err, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Open(%q) error %q does not mention %q", tc.url, err, tc.text)
		}
		if n := len(dlockWord.FindAllString(err.Error(), -1)); n != 1 {
			t.Errorf("Open(%q) error %q says dlock %d times; want once", tc.url, err, n)
		}
	}
}

// dlockWord matches "dlock:" as a word (not the end of "redlock:").
var dlockWord = regexp.MustCompile(`(^|[^A-Za-z0-9_])dlock:`)

// registerRedlockish registers the scheme of TestOpenKeepsDriverPrefixes
// once, however often the test runs (go test -count).
var registerRedlockish = sync.OnceFunc(func() {
	dlock.Register("opentest-redlockish", func(context.Context, *url.URL) (driver.Locker, error) {
		return nil, fmt.Errorf("redlock: 1 of 3 answered: %w", driver.ErrUnavailable)
	})
})

// A driver's own prefix that ends in "dlock: " is not taken for dlock's.
func TestOpenKeepsDriverPrefixes(t *testing.T) {
	registerRedlockish()
	_, err := dlock.Open(context.Background(), "opentest-redlockish://x")
	const want = "dlock: open opentest-redlockish: redlock: 1 of 3 answered: backend unavailable"
	if err == nil || err.Error() != want || !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Open = %v; want %q", err, want)
	}
}

func TestOpenCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := dlock.Open(ctx, "mem://")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: %v", err)
	}
	if err == context.Canceled || !strings.HasPrefix(err.Error(), "dlock: open mem: ") {
		t.Fatalf("Open with a cancelled context: %q; want it wrapped as every Open error is", err)
	}
}

func TestRegisterMisuse(t *testing.T) {
	for name, f := range map[string]func(){
		"duplicate": func() { dlock.Register("mem", nilSafeOpen) },
		"nil":       func() { dlock.Register("fresh-scheme", nil) },
		"empty":     func() { dlock.Register("", nilSafeOpen) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register %s did not panic", name)
				}
			}()
			f()
		}()
	}
	found := false
	for _, s := range dlock.Schemes() {
		found = found || s == "mem"
	}
	if !found {
		t.Fatalf("Schemes() = %v; want it to list mem", dlock.Schemes())
	}
}

// Two Opens of one mem:// name share a store; other names do not.
func TestOpenNamedMemoryStores(t *testing.T) {
	ctx := context.Background()
	open := func(u string) *dlock.Locker {
		l, err := dlock.Open(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	a, b, c := open("mem://shared"), open("mem://shared?ttl=5s"), open("mem://other")
	ma, _ := a.NewMutex("k")
	if err := ma.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	mb, _ := b.NewMutex("k")
	if err := mb.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("same store name: TryLock = %v; want ErrNotAcquired", err)
	}
	mc, _ := c.NewMutex("k")
	if err := mc.TryLock(ctx); err != nil {
		t.Fatalf("other store name: TryLock = %v", err)
	}
	if got := mb.Key(); got != "k" {
		t.Fatalf("Key() = %q", got)
	}
}

// A scheme this project ships, whose package the program did not import,
// is refused with ErrInvalidURL and an error naming the package to import.
func TestOpenNamesThePackageToImport(t *testing.T) {
	ctx := context.Background()
	for scheme, pkg := range map[string]string{
		"redis+cluster":  "github.com/dlock-go/dlock/backend/redis/rediscluster",
		"redis+sentinel": "github.com/dlock-go/dlock/backend/redis/redissentinel",
		"zk":             "github.com/dlock-go/dlock/backend/zookeeper",
		"etcd":           "github.com/dlock-go/dlock/backend/etcd",
	} {
		_, err := dlock.Open(ctx, scheme+"://127.0.0.1:1")
		if !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), `import _ "`+pkg+`"`) {
			t.Errorf("Open(%s://) = %v, want ErrInvalidURL naming %s", scheme, err, pkg)
		}
	}
	if _, err := dlock.Open(ctx, "nosuch://x"); !errors.Is(err, dlock.ErrInvalidURL) || !strings.Contains(err.Error(), "unknown scheme") {
		t.Errorf("Open(nosuch://) = %v, want ErrInvalidURL, unknown scheme", err)
	}
}
