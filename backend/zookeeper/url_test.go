package zookeeper

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, raw := range []string{
		"zk://",
		"zk:///dlock",
		"zk:127.0.0.1:2181",
		"zk://127.0.0.1:notaport",
		"zk://127.0.0.1:2181,,127.0.0.1:2182",
		"zk://127.0.0.1:2181,127.0.0.1:",
		"zk://127.0.0.1:2181/#frag",
		"zk://127.0.0.1:2181/a//b",
		"zk://127.0.0.1:2181/a/./b",
		"zk://127.0.0.1:2181/a/../b",
		"zk://127.0.0.1:2181/a/%00",
		"zk://127.0.0.1:2181/zookeeper",
		"zk://127.0.0.1:2181/zookeeper/quota",
		"zk://127.0.0.1:2181?timeout=1s",
		"zk://127.0.0.1:2181?session_timeout=abc",
		"zk://127.0.0.1:2181?session_timeout=0s",
		"zk://127.0.0.1:2181?session_timeout=-1s",
		"zk://127.0.0.1:2181?session_timeout=1s&session_timeout=2s",
		"zk://127.0.0.1:2181?connect_timeout=0s",
		"zk://127.0.0.1:2181?acl=bogus",
		"zk://127.0.0.1:2181?acl=creator",
		"zk://user@127.0.0.1:2181",
		"zk://:pw@127.0.0.1:2181",
		"zk://127.0.0.1:2181?ttl=bogus",
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		l, err := dlock.Open(ctx, raw)
		cancel()
		if !errors.Is(err, dlock.ErrInvalidURL) {
			if l != nil {
				_ = l.Close()
			}
			t.Errorf("Open(%q) = %v; want ErrInvalidURL", raw, err)
		}
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want options
	}{
		{"zk://127.0.0.1", options{
			servers: []string{"127.0.0.1:2181"}, prefix: "/dlock",
			sessionTimeout: DefaultSessionTimeout, connectTimeout: DefaultConnectTimeout,
		}},
		{"zk://a:1,b:2/", options{
			servers: []string{"a:1", "b:2"}, prefix: "/dlock",
			sessionTimeout: DefaultSessionTimeout, connectTimeout: DefaultConnectTimeout,
		}},
		{"zk://u:p%40ss@h:2181/apps/locks/?session_timeout=4s&connect_timeout=1s&acl=creator", options{
			servers: []string{"h:2181"}, prefix: "/apps/locks",
			sessionTimeout: 4 * time.Second, connectTimeout: time.Second,
			creator: true, auth: "u:p@ss",
		}},
		{"zk://h/x?acl=open", options{
			servers: []string{"h:2181"}, prefix: "/x",
			sessionTimeout: DefaultSessionTimeout, connectTimeout: DefaultConnectTimeout,
		}},
	} {
		u, err := url.Parse(c.raw)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", c.raw, err)
		}
		got, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%q): %v", c.raw, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseURL(%q) = %+v; want %+v", c.raw, got, c.want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(nil, Config{SessionTimeout: time.Second}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Errorf("New(nil conn): %v; want ErrInvalidOption", err)
	}
}
