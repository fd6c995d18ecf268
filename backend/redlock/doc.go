// Package redlock is dlock's Redlock backend (scheme redlock://): one lock
// over N independent Redis masters, held while a majority agrees, as the
// Redis distributed-lock page defines the algorithm, with fencing tokens
// that stay monotone across holders.
//
// # URL
//
//	redlock://[user:password@]host1:port,host2:port,host3:port[/]?param=value&...
//
// N hosts, N odd and at least 3 (a port defaults to 6379; a host given
// twice is an error, since it would count twice). Parameters:
//
//	prefix=dlock:   put before every key, counter and channel name
//	timeout=100ms   per-instance timeout, capped at a tenth of the lease
//	drift=0.01      clock-drift factor: validity is TTL - TTL*drift - 2ms
//	db=0            database number on every instance
//
// and dlock.Open's ttl= and autorenew=. Anything else is an
// ErrInvalidURL error. [New] takes N *redis.Client values the caller
// already has (standalone or Sentinel failover clients, one per
// independent master) and a [Config].
//
// # Acquire
//
// One attempt (TryAcquire) sends the acquire script to every instance at
// once; requests from concurrent callers to one instance share pipelines.
// Each instance has the per-instance timeout to answer, counted from the
// moment the request is sent, so a paused or unreachable instance costs at
// most that much and never the lease.
//
// The hold is granted if a majority (N/2+1) took the lock and the whole
// exchange ended within the validity window, TTL - TTL*drift - 2ms,
// measured from before the first request was sent. The lease's Expires is
// that same instant plus the validity: elapsed time is never counted twice
// and never forgotten.
//
// When the attempt fails, the lock is released, in parallel, on every
// instance where it may have been taken (those that said yes and those that
// did not answer), and the error says why:
//
//   - fewer than a majority answered at all: an error matching
//     dlock.ErrUnavailable (quorum unreachable);
//   - the others hold it: a *driver.HeldError (dlock.ErrNotAcquired)
//     carrying how long until enough of their leases run out for a
//     majority to be free (the (N/2+1-free)-th shortest PTTL), plus a
//     random part, so that waiters woken by expiry do not retry together.
//
// Waiting is driven by release messages: Watch subscribes to the key's
// channel on every instance (one shared pub/sub connection per instance)
// and a message from any instance wakes the waiter. Within one Locker, the
// portable layer already lets only one caller per key talk to the servers.
//
// The random retry delay of the Redlock algorithm is applied where it
// matters: when no single owner holds a majority (several clients split
// the instances between them), the losing attempt releases what it took
// with a release message and sleeps a random delay of up to twice its own
// round trip before reporting, so contenders do not retry in lockstep.
// When one owner clearly holds a majority, partial locks are removed
// without a message, since only that owner's release can free the key.
//
// # Fencing tokens
//
// A Redlock instance cannot issue a token on its own: taking the largest of
// the per-instance counters seen by a majority is not monotone. With
// counters a=0 b=10 c=50 d=60 e=60, client A wins {a,d,e} and gets 61; once
// A is gone, B wins {a,b,c} and would get 51.
//
// So the token takes two phases. Phase 1 (with the acquire) increments the
// key's counter on each instance that grants the lock and returns it; the
// token T is the largest. Phase 2 raises the counter to T on each of those
// instances whose counter is lower, only while the lock there is still
// ours. The hold counts only if T is now on a majority of counters, each
// written while that instance's lock was ours. Any later holder's majority
// intersects that one in an instance whose counter it could only increment
// after our lock there was gone, so it reads at least T and gets more than
// T. Phase 2 is a second round trip only when counters disagree: usually
// never after a key's first use.
//
// This holds as long as instances keep their counters. Run them with AOF
// and appendfsync always, or follow the Redlock page's rule for restarts
// without persistence: keep a restarted instance out for longer than the
// longest TTL. A counter that is missing (new key, or an instance that lost
// its data) is seeded with the server clock in whole seconds, as
// microseconds, so a restart that wiped a counter still issues tokens above
// the old ones, provided one key is not taken more than a million times a
// second and the instances' clocks do not lag each other by more than the
// time since the counter was first seeded. Counters are kept forever (one
// small string per key ever locked).
//
// # Renew, release
//
// Renew extends the lock (compare-and-PEXPIRE) on every instance where it
// is still ours, in parallel; it succeeds on a majority. When a majority
// can no longer be reached even counting instances that did not answer,
// the hold is lost (ErrLockLost) and Done is closed; when it is only
// unknown, the error matches ErrUnavailable and the watchdog tries again
// until the validity window closes. Release deletes the lock
// (compare-and-delete) on every instance and publishes a release message
// where it did.
//
// # What it promises
//
// The dlock promises hold under Redlock's own assumptions: bounded clock
// drift between the client and the instances, and instances that keep
// their data (see above). Exclusion inside the validity window is Redlock's
// guarantee and no more: a client paused past its lease, or a clock that
// jumps, can overlap with the next holder, which is why the fencing token
// exists. A protected resource that checks tokens (package fence) stays
// safe even then.
package redlock
