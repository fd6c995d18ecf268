package redis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/redis"
)

// Bad URLs are refused before anything is dialled. Their host is a listener
// that counts connections: it must see none.
func TestOpenInvalidURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan string, 100) // remote addresses, in accept order
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	bad := []string{
		"redis://",                              // no host
		"redis://127.0.0.1:notaport",            // malformed port
		"redis://127.0.0.1:99999",               // port out of range
		"redis://127.0.0.1:1,127.0.0.1:2",       // one server takes one host
		"redis://127.0.0.1:1,",                  // empty host in a list
		"redis://127.0.0.1:1/x",                 // database not a number
		"redis://127.0.0.1:1/1/2",               // path too deep
		"redis://127.0.0.1:1?bogus=1",           // unknown parameter
		"redis://127.0.0.1:1?tll=5s",            // typo of a portable parameter
		"redis://127.0.0.1:1?ttl=soon",          // bad portable value
		"redis://127.0.0.1:1?prefix=a{b",        // brace breaks the hash tag
		"redis://127.0.0.1:1?prefix=a}b",        //
		"redis://127.0.0.1:1?prefix=",           // empty prefix
		"redis://127.0.0.1:1?prefix=a&prefix=b", // given twice
		"redis://127.0.0.1:1?wait_replicas=x",   // not a number
		"redis://127.0.0.1:1?wait_replicas=-1",  // negative
		"redis://127.0.0.1:1?wait_replicas=1&wait_timeout=0s",
		"redis://127.0.0.1:1?wait_replicas=1&wait_timeout=-1s",
		"redis://127.0.0.1:1?wait_replicas=1&wait_timeout=fast",
		"redis://127.0.0.1:1?wait_timeout=1s",      // without wait_replicas
		"redis://127.0.0.1:1?allow_eviction=maybe", // not a bool
		"redis://127.0.0.1:1?dial_timeout=abc",     // bad go-redis option
		"redis://127.0.0.1:1?pool_size=many",       //
		"redis://127.0.0.1:1?addr=127.0.0.1:2",     // hosts go in the host part
		"redis://127.0.0.1:1#frag",                 // fragment
		"rediss://127.0.0.1:1?unknown=1",           // TLS, unknown parameter
		"redis+cluster://",                         // no hosts
		"redis+cluster://127.0.0.1:1,,127.0.0.1:2", // empty host
		"redis+cluster://127.0.0.1:1/0",            // a Cluster has no db
		"redis+cluster://127.0.0.1:1?db=0",         //
		"redis+cluster://127.0.0.1:1?prefix={x}",   //
		"redis+sentinel://127.0.0.1:1",             // master_name missing
		"redis+sentinel://127.0.0.1:1?master_name=m&nope=1",
		"redis:opaque", // not a hierarchical URL
		"redis://[::1", // unparsable
	}
	for _, raw := range bad {
		raw = strings.ReplaceAll(raw, "127.0.0.1:1", ln.Addr().String())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := dlock.Open(ctx, raw)
		cancel()
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded; want ErrInvalidURL", raw)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidURL) {
			t.Errorf("Open(%q): %v; want ErrInvalidURL", raw, err)
		}
	}
	// A last connection of our own: connections are accepted in order, so
	// every one made before it has been accepted when it is.
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	marker := c.LocalAddr().String()
	c.Close()
	for a := range accepted {
		if a == marker {
			break
		}
		t.Errorf("an Open of a bad URL dialled the server (from %s); it must fail on the URL alone", a)
	}
}

// Errors never echo a password from the URL.
func TestOpenInvalidURLRedactsPassword(t *testing.T) {
	_, err := dlock.Open(context.Background(), "redis://user:s3cret@127.0.0.1:1?bogus=1")
	if !errors.Is(err, dlock.ErrInvalidURL) {
		t.Fatalf("Open: %v; want ErrInvalidURL", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error reveals the password: %v", err)
	}
}

// A well-formed URL for a server that refuses connections is
// ErrUnavailable, not ErrInvalidURL.
func TestOpenRefused(t *testing.T) {
	for _, raw := range []string{
		"redis://127.0.0.1:1?prefix=p&wait_replicas=1&wait_timeout=100ms&allow_eviction=true&dial_timeout=1s",
		"redis+cluster://127.0.0.1:1,127.0.0.1:2",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := dlock.Open(ctx, raw)
		cancel()
		if err == nil {
			_ = l.Close()
			t.Fatalf("Open(%q) on a closed port succeeded", raw)
		}
		if !errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, dlock.ErrInvalidURL) {
			t.Fatalf("Open(%q) on a closed port: %v; want ErrUnavailable only", raw, err)
		}
	}
}
