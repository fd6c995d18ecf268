package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		raw          string
		table, schem string
		check        func(t *testing.T, host string, port uint16, timeout time.Duration, maxConns int32, rt map[string]string)
	}{
		{raw: "postgres://u:p@db.example:6543/app?sslmode=disable", table: DefaultTable,
			check: func(t *testing.T, host string, port uint16, timeout time.Duration, _ int32, _ map[string]string) {
				if host != "db.example" || port != 6543 {
					t.Errorf("host %s port %d", host, port)
				}
				if timeout != DefaultConnectTimeout {
					t.Errorf("connect timeout %v; want the default %v", timeout, DefaultConnectTimeout)
				}
			}},
		{raw: "postgresql://u@h/app?table=locks&schema=ops&connect_timeout=2&pool_max_conns=7&application_name=svc&sslmode=disable",
			table: "locks", schem: "ops",
			check: func(t *testing.T, _ string, port uint16, timeout time.Duration, maxConns int32, rt map[string]string) {
				if port != 5432 || timeout != 2*time.Second || maxConns != 7 || rt["application_name"] != "svc" {
					t.Errorf("port %d timeout %v max conns %d runtime %v", port, timeout, maxConns, rt)
				}
				if _, ok := rt["table"]; ok {
					t.Errorf("table= passed on to the server: %v", rt)
				}
			}},
		{raw: "postgres:///app?host=/var/run/postgresql&table=T%20x", table: "T x"},
		{raw: "postgres://h/app?options=-c%20synchronous_commit%3Doff", table: DefaultTable,
			check: func(t *testing.T, _ string, _ uint16, _ time.Duration, _ int32, rt map[string]string) {
				if rt["options"] != "-c synchronous_commit=off" {
					t.Errorf("options not passed to the server: %v", rt)
				}
			}},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		o, pc, err := parseURL(u)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if o.Table != c.table || o.Schema != c.schem {
			t.Errorf("%s: table %q schema %q; want %q %q", c.raw, o.Table, o.Schema, c.table, c.schem)
		}
		if c.check != nil {
			cc := pc.ConnConfig
			c.check(t, cc.Host, cc.Port, cc.ConnectTimeout, pc.MaxConns, cc.RuntimeParams)
		}
	}
}

func TestBadURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, raw := range []string{
		"postgres://h/db?tabel=x",                      // typo: unknown parameter
		"postgres://h/db?sslmode=disable&frobnicate=1", // unknown, would go to the server
		"postgres://h/db?table=",                       // empty
		"postgres://h/db?schema=",                      // empty
		"postgres://h/db?table=" + strings.Repeat("t", MaxTableLen+1),
		"postgres://h/db?table=a&table=b",     // twice
		"postgres://h/db?pool_max_conns=lots", // pgx refuses
		"postgres://h:notaport/db",            // bad port
		"postgres:///db",                      // no host
		"postgres://h/db#frag",                // fragment
	} {
		start := time.Now()
		l, err := dlock.Open(ctx, raw)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", raw, err)
		}
		if errors.Is(err, dlock.ErrUnavailable) {
			t.Errorf("Open(%q): %v; a bad URL is not an unreachable server", raw, err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("Open(%q) took %v: it must not have dialled", raw, el)
		}
	}
}

func TestBadOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := New(ctx, nil, Config{}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("New(nil pool): %v; want ErrInvalidOption", err)
	}
	for _, o := range []Config{{Table: strings.Repeat("t", MaxTableLen+1)}, {Table: "a\x00b"}, {Schema: "s\x00"}} {
		if _, err := NewFence(o); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Errorf("NewFence(%+v): %v; want ErrInvalidOption", o, err)
		}
	}
}

// postgresql:// is the same backend as postgres://.
func TestSchemePostgresql(t *testing.T) {
	e := newEnv(t)
	u, err := url.Parse(e.raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Scheme = SchemeLong
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := dlock.Open(ctx, u.String()+"&ttl=30s")
	if err != nil {
		t.Fatalf("Open(%s): %v", u.Redacted(), err)
	}
	defer l.Close()
	m := mustMutex(t, l, "k")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.Lease().TTL; got != 30*time.Second {
		t.Errorf("lease %v; want the URL's ttl=30s", got)
	}
	other := mustMutex(t, e.locker(t), "k")
	if err := other.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock through postgres:// on a key held through postgresql://: %v; want ErrNotAcquired", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
