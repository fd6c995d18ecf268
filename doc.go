// Package dlock is a distributed lock with one API over many stores, from
// memory and a file on one host to Redis and consensus stores (Schemes
// lists the ones a program has imported; docs/backends.md in the
// repository compares them). The store is a URL in configuration; moving
// from Redis to etcd is a change of URL.
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
//	if err := m.Lock(ctx); err != nil {
//		return err
//	}
//	defer m.Unlock(ctx)
//	// Pass m.Token() to the resource, so that it can refuse a holder
//	// paused past its lease (package fence).
//	return chargeOnce(ctx, m.Token())
//
// # One shape of hold
//
// Mutex (one key), MultiMutex (a set of keys, all or nothing), Semaphore
// (one of N permits) and Election (one leader) are made by the Locker
// (NewMutex, NewMultiMutex, NewSemaphore, NewElection) and hold the same
// way: each is a Lockable (Lock, TryLock) and a Hold (Token, Lease, Done,
// Err, Renew, Unlock). Do runs a function under any of them, with a context
// cancelled when the hold is lost; a leader's work loop is Do over its
// Election. MultiMutex, Semaphore, Election and RWMutex are built here
// from Mutexes, so they work on every backend.
//
// # Readers and writers
//
// RWMutex (NewRWMutex) is a read-write lock: Lock, TryLock and Unlock for
// the writer, RLock, TryRLock and RUnlock for readers, at most a fixed
// number at once; RLocker makes a reader a Lockable for Do. A writer takes
// a gate Mutex and waits for the readers inside; readers pass the gate,
// so those arriving behind a waiting writer queue after it. A writer's
// token is above every token before it, read or write; a reader's is the
// gate token of its entry: a resource accepts a write iff its token is at
// least the highest of both kinds seen, a read iff at least the highest
// writer token. A read costs N+5 backend operations uncontended, a write
// N+3, with N readers (docs/rwmutex.md).
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
//     fence implements the check in memory, in files, in SQL, Redis and
//     etcd).
//  3. A loss signal. Done() is closed, and the context given to Do is
//     cancelled, before the lease can expire on the server when renewals
//     fail, and at once when the backend reports loss (session expired, key
//     deleted). A holder never learns of a lost lock only by failing to
//     unlock it. Done is a notification, not a guard: after a pause, timers
//     fire late. Check Lease().Valid(), or the Err of Do's context, which
//     both read the monotonic clock, immediately before acting.
//
// The rules every backend follows the same way (Do unlocks on panic; Close
// and calls in flight; the error classes; Err, why a hold ended) are listed
// on Mutex and Locker.Close, and checked by package conformance. How the
// portable layer keeps them (the watchdog, the validity clock, the waits)
// is in docs/design.md in the repository.
//
// # Errors
//
// Errors are matched with errors.Is against the sentinels ErrNotAcquired,
// ErrNotHeld, ErrLockLost, ErrClosed, ErrUnavailable, ErrAlreadyHeld,
// ErrInvalidKey, ErrInvalidOption and ErrInvalidURL (and, for elections,
// ErrNoLeader). A caller's context.Canceled or context.DeadlineExceeded
// stays in the chain; when the context ends during Lock, the error also
// matches ErrNotAcquired if the backend answered that the key was held, and
// ErrUnavailable only if it never answered. A lost hold's error matches
// ErrLockLost (never ErrNotHeld) and one of ErrRenewalFailed,
// ErrReportedLost and ErrLeaseExpired; Err returns it, or ErrUnlocked or
// ErrClosed.
//
// # Observing
//
// WithLogger logs the life of holds with log/slog. WithObserver gives an
// Observer (package observe) every event of a hold's life: Lock and TryLock
// with the steps of their wait, acquisition with its token, each renewal
// with the validity margin it had left, loss with its cause, release.
// Module github.com/dlock-go/dlock/otel turns them into OpenTelemetry
// metrics and spans. With no observer each event costs one nil check.
package dlock
