package redis

import (
	"net/url"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/redis/internal/redisclient"
)

// The tests of this package open every topology (one server, Cluster,
// Sentinel) by URL. Packages rediscluster and redissentinel register the
// Cluster and Sentinel schemes for programs; they import this package, so
// its own tests register the same openers here.
func init() {
	for _, s := range []string{"redis+cluster", "rediss+cluster"} {
		dlock.Register(s, Opener(redisclient.Cluster))
	}
	for _, s := range []string{"redis+sentinel", "rediss+sentinel"} {
		dlock.Register(s, Opener(redisclient.Sentinel))
	}
}

// newClient builds the client of a URL of any of the Redis schemes.
func newClient(u *url.URL) (goredis.UniversalClient, error) {
	switch _, kind, _ := strings.Cut(strings.ToLower(u.Scheme), "+"); kind {
	case "cluster":
		return redisclient.Cluster(u)
	case "sentinel":
		return redisclient.Sentinel(u)
	}
	return redisclient.Standalone(u)
}

// Opener refuses a nil constructor at once, not at the first Open.
func TestOpenerNilPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Opener(nil) did not panic")
		}
	}()
	Opener(nil)
}
