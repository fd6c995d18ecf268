package lockctl

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/memory" // mem://, for demo and bench
)

// EnvURL is the environment variable naming the default backend.
const EnvURL = "DLOCK_URL"

// defaultURL is the backend used when neither --backend nor DLOCK_URL is
// given: the file backend in its default directory, which works across
// the processes of one host with no server.
const defaultURL = "file://"

// openTimeout bounds connecting to a backend.
const openTimeout = 15 * time.Second

func defaultFileDir() string { return file.DefaultDir() }

// backendURL returns flagURL, else $DLOCK_URL, else the file default.
func backendURL(flagURL string, sys IO) string {
	if flagURL != "" {
		return flagURL
	}
	if sys.Getenv != nil {
		if v := strings.TrimSpace(sys.Getenv(EnvURL)); v != "" {
			return v
		}
	}
	return defaultURL
}

// known describes the schemes lockctl knows, in the order of the help text.
var known = []struct{ scheme, example, text string }{
	{"file", "file:///dir", "one host, no server; file:// is %s"},
	{"mem", "mem://", "one process only (demo, bench)"},
	{"redis", "redis://host:6379", "one Redis; also rediss://, redis+cluster://, redis+sentinel://"},
	{"redlock", "redlock://h1:6380,h2:6381,...", "Redlock over independent Redis masters"},
	{"etcd", "etcd://host:2379", "etcd leases"},
	{"zk", "zk://host:2181", "ZooKeeper ephemeral sequential znodes"},
	{"consul", "consul://host:8500", "Consul sessions"},
	{"postgres", "postgres://user:pw@host:5432/db", "PostgreSQL lease rows; also postgresql://"},
}

// variants are schemes shown under another's line.
var variants = map[string]bool{
	"rediss": true, "redis+cluster": true, "rediss+cluster": true, "redis+sentinel": true, "rediss+sentinel": true,
	"postgresql": true,
}

// schemeLines lists the registered backends for the help text.
func schemeLines() string {
	registered := map[string]bool{}
	for _, s := range dlock.Schemes() {
		registered[s] = true
	}
	var b strings.Builder
	for _, k := range known {
		if registered[k.scheme] {
			text := k.text
			if k.scheme == "file" {
				text = fmt.Sprintf(text, defaultFileDir())
			}
			fmt.Fprintf(&b, "  %-32s %s\n", k.example, text)
			delete(registered, k.scheme)
		}
	}
	for _, s := range dlock.Schemes() {
		if registered[s] && !variants[s] {
			fmt.Fprintf(&b, "  %-32s\n", s+"://...")
		}
	}
	return b.String()
}

// redact hides a password in a backend URL for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if strings.EqualFold(u.Scheme, "file") && u.Host == "" && u.Path == "" {
		return "file://" + defaultFileDir() // file:// means the default directory
	}
	out := u.Redacted()
	// url.URL drops an empty authority ("mem://" becomes "mem:"); keep it.
	if !strings.HasPrefix(out, u.Scheme+"://") && strings.HasPrefix(raw, u.Scheme+"://") {
		out = u.Scheme + "://" + strings.TrimPrefix(out, u.Scheme+":")
	}
	return out
}

// open connects to the backend at rawURL, with a bounded wait.
func open(ctx context.Context, rawURL string, opts ...dlock.Option) (*dlock.Locker, error) {
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	l, err := dlock.Open(ctx, rawURL, opts...)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", redact(rawURL), err)
	}
	return l, nil
}
