package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

// Errors of this backend, matched with errors.Is.
var (
	// ErrNotALock: the lock key (or its fencing counter) holds a value this
	// backend did not write: a hash, a list, a string without expiry, a
	// counter that is not an integer. Nothing is changed; an operator has to
	// remove the value (or pick another key prefix).
	ErrNotALock = errors.New("redis: the lock key holds a value that is not a dlock lock")

	// ErrEvictionPolicy: the server's maxmemory-policy may evict keys. An
	// evicted lock lets a second holder in; an evicted fencing counter is
	// re-seeded from the clock (still safe, but only by that argument).
	// Returned at open unless eviction is explicitly allowed, and by an
	// acquire after the policy was read again and found unsafe: the first
	// acquire after a connection to a server not seen before (a Sentinel
	// failover, a promoted Cluster replica, a new Cluster node), after a
	// renewal or release found its key gone on a server that may evict,
	// and at most a minute after the last check otherwise (a CONFIG SET on
	// a server already in use). A renewal or release that finds its key
	// gone on such a server (allowed or not) returns an error matching
	// both ErrNotHeld and ErrEvictionPolicy that names the policy: eviction
	// is then the likely cause of the loss.
	ErrEvictionPolicy = errors.New("redis: maxmemory-policy may evict lock keys")

	// ErrReplicas: with WaitReplicas set, fewer replicas than asked for
	// acknowledged an acquire or renew in time. The acquire was undone. It
	// also matches dlock.ErrUnavailable.
	ErrReplicas = errors.New("redis: too few replicas acknowledged the write")
)

// Server errors that mean "not now" rather than "never": the cluster or the
// server cannot serve the command at the moment.
var unavailablePrefixes = []string{
	"CLUSTERDOWN", "LOADING", "MASTERDOWN", "TRYAGAIN", "READONLY", "BUSY",
	"NOREPLICAS", "MOVED", "ASK", "OOM",
}

// mapErr classifies a go-redis error for the portable layer: the caller's
// context errors as they are, a value that is not a lock as ErrNotALock,
// other server replies as plain errors, everything else (network, closed
// client, timeouts) as driver.ErrUnavailable.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if redislua.IsNotALock(err) {
		return fmt.Errorf("%w: %v", ErrNotALock, err)
	}
	if serverError(err) {
		msg := err.Error()
		for _, p := range unavailablePrefixes {
			if strings.HasPrefix(msg, p+" ") || msg == p {
				return driver.Unavailable(err)
			}
		}
		return fmt.Errorf("redis: %w", err)
	}
	return driver.Unavailable(err)
}

// serverError reports whether err is an error reply from the server, which
// means the request was answered (and, for our scripts, changed nothing).
func serverError(err error) bool {
	var rerr goredis.Error
	return errors.As(err, &rerr) && !errors.Is(err, goredis.Nil)
}

// mapErr is mapErr for an error of this driver's client. On a Cluster, an
// error that is not the caller's and not a reply about the key (a node
// that does not answer, CLUSTERDOWN, TRYAGAIN) also makes the client read
// the slot map again at once: go-redis otherwise keeps sending a failed
// master's slots to it until its periodic reload (a minute by default),
// long after a replica took over.
func (d *redisDriver) mapErr(err error) error {
	out := mapErr(err)
	if c, ok := d.client.(*goredis.ClusterClient); ok && errors.Is(out, driver.ErrUnavailable) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		c.ReloadState(context.Background())
	}
	return out
}
