// Package dlock is a distributed lock with one API over many stores: Redis,
// Redlock, etcd, ZooKeeper, Consul, a file on one host, and memory.
//
// # Usage
//
// Import the backend you configure (a blank import registers its URL
// scheme), open a Locker once per process, and make a Mutex per key:
//
//	import (
//		"github.com/dlock-go/dlock"
//		_ "github.com/dlock-go/dlock/backend/redis"
//	)
//
//	locker, err := dlock.Open(ctx, "redis://127.0.0.1:6379?ttl=10s")
//	...
//	defer locker.Close()
//	m, err := locker.NewMutex("orders/42")
//	...
//	err = dlock.Do(ctx, m, func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost; pass m.Token() to the
//		// resource so that it can reject a stale holder.
//		return chargeOnce(ctx, m.Token())
//	})
//
// Moving from Redis to etcd is a change of URL.
//
// # What a lock promises
//
// No lease-based lock can guarantee mutual exclusion by itself: a holder can
// be paused (GC, swap, SIGSTOP) past its lease while another client takes
// the lock. dlock therefore promises three things, on every backend, and is
// checked against them by package conformance on real servers:
//
//  1. Exclusion inside a validity window. A holder may act while
//     time.Now() is before Lease().Expires, which is measured on the local
//     monotonic clock from the moment the acquire (or renew) request was
//     sent, minus an allowance for clock drift (TTL*0.01 + 2ms).
//  2. A fencing token. Token() is strictly increasing across successive
//     holders of a key, so a resource can reject a stale holder (package
//     fence implements the check for memory, SQL, Redis and etcd).
//  3. A loss signal. Done() is closed, and the context given to Do is
//     cancelled, before the lease can expire on the server when renewals
//     fail, and at once when the backend reports loss (session expired, key
//     deleted). A holder never learns of a lost lock only by failing to
//     unlock it. Done is a notification, not a guard: after a pause, timers
//     fire late. Check Lease().Valid(), or the Err of Do's context, which
//     both read the monotonic clock, immediately before acting.
//
// The rules every backend follows the same way (Do unlocks on panic; Close
// and calls in flight; the error classes; Mutex.Err, why a hold ended) are
// listed on Mutex and Locker.Close, and checked by package conformance.
//
// # Structure
//
// This package is the portable layer. It owns everything that must behave
// the same everywhere: option validation, the validity clock, the renewal
// watchdog (about every TTL/3; after failed renewals the hold is declared
// lost at 90% of its validity window), Done, waiting (a backend
// notification or the holder's remaining lease, never a fixed polling
// interval), an in-process gate per key so that waiters of one process share
// one backend wait, and error classification. A backend implements the small
// contract in package driver: one acquire attempt, release, renew, watch.
//
// The watchdog is one scheduler per Locker: a timer heap of every hold,
// served by one goroutine that runs while holds exist and a small pool of
// workers for the backend calls, so a hold costs no goroutine and no timer
// of its own. Renewal times are aligned to a grid of TTL/12 (a renewal is
// at most half a step early or late), so holds granted close together fall due
// together, and a backend that implements driver.BatchRenewer renews all
// of them in one call (a Redis pipeline, one keepalive of a shared etcd
// lease). An Unlock waits for a renewal of its hold in flight, so that
// none reaches the store after the release, except a batched one on a
// backend whose renewals are owner-checked (driver.OwnerCheckedRenewer:
// Redis, Redlock, file), which changes nothing after the release: there an
// Unlock does not wait for the renewals of every hold due with its own. A
// backend that implements driver.LossNotifier reports losses through a
// callback, without a goroutine per hold waiting on its loss channel.
//
// Backends register a URL scheme (Register, Open), as database/sql drivers
// do; each also has a constructor taking a client the program already has.
//
// # Multi-key locks and semaphores
//
// MultiMutex locks a set of keys all or nothing, in sorted order (so sets
// that overlap never deadlock), with a token per key and one Done for the
// set. Semaphore holds one of N permits, each a lease on a permit slot key
// with its own token and Done. Both are built here from Mutexes, so they
// work on every backend; package conformance checks them on each.
//
// # Errors
//
// Errors are matched with errors.Is against the sentinels ErrNotAcquired,
// ErrNotHeld, ErrLockLost, ErrClosed, ErrUnavailable, ErrAlreadyHeld,
// ErrInvalidKey, ErrInvalidOption and ErrInvalidURL (and, for elections,
// ErrNoLeader). A caller's
// context.Canceled or context.DeadlineExceeded stays in the chain; when the
// context ends during Lock, the error also matches ErrNotAcquired if the
// backend answered that the key was held, and ErrUnavailable only if it
// never answered. A lost hold's error matches ErrLockLost (never
// ErrNotHeld) and one of ErrRenewalFailed, ErrReportedLost and
// ErrLeaseExpired; Mutex.Err returns it, or ErrUnlocked or ErrClosed.
//
// # Leader election
//
// NewElection builds leader election on the same pieces, on every
// backend: Campaign is a Lock of the election's name with the candidate's
// value as its owner description, the term is the hold's fencing token,
// Done is its loss signal, Leader is an Inspect, and Observe follows the
// leaders through a watch (see Election for the costs per backend).
//
// # Observing
//
// WithObserver gives an Observer every event of a hold's life: Lock and
// TryLock with the steps of their wait, acquisition with its token, each
// renewal with the validity margin it had left, loss with its cause
// (LossCause), release. Module github.com/dlock-go/dlock/otel turns them into
// OpenTelemetry metrics and spans; WithLogger logs them with log/slog. With
// no observer each event costs one nil check.
package dlock
