// Package consul is dlock's Consul backend (scheme consul://): Consul's
// Chubby-style lock model, sessions and KV acquire, through the official
// client github.com/hashicorp/consul/api.
//
// # URL
//
//	consul://HOST:PORT/PREFIX?lockdelay=15s&monitors=64&session_per_hold=false&ttl=30s&autorenew=true
//
// where
//
//   - HOST:PORT is one Consul agent's HTTP address (default port 8500). It
//     may be left out (consul:///PREFIX): then CONSUL_HTTP_ADDR, or
//     127.0.0.1:8500, is used. One agent only: an agent forwards to the
//     servers itself.
//   - PREFIX is the KV prefix the lock keys live under (default "dlock"):
//     slash-separated segments of [A-Za-z0-9._-].
//   - lockdelay: the sessions' lock-delay (default 15s, Consul's own
//     default; 0 turns it off; at most 60s). See below.
//   - monitors: how many holds of the Locker are watched by a blocking
//     query at a time (default 64; 0 for none). See "Loss" below.
//   - session_per_hold: give every hold a session of its own instead of
//     sharing one per TTL (default false). See "Sessions" below.
//   - ttl, autorenew: the portable parameters (see dlock.Open). The TTL
//     must be between 10s and 24h, the session TTLs Consul accepts.
//
// Any other parameter is an error (dlock.ErrInvalidURL). The client is
// configured by api.DefaultConfig, so the CONSUL_* environment variables
// apply (CONSUL_HTTP_SSL, CONSUL_CACERT, CONSUL_HTTP_TOKEN, ...), with the
// URL's address in place of CONSUL_HTTP_ADDR. The ACL token is never taken
// from the URL: a user:password part or a token= parameter is rejected,
// because URLs end up in logs and process listings. Set CONSUL_HTTP_TOKEN
// (or CONSUL_HTTP_TOKEN_FILE), or make the client yourself and use New or
// NewFromConfig. The token needs session:write on the agent's node and
// key:write on the prefix; a refusal is reported as ErrPermission.
//
// Open checks that the agent answers and knows a leader; an agent that
// does not is dlock.ErrUnavailable.
//
// # How a lock works
//
// A hold is a KV key locked by a session: TTL only (no health checks, so
// only its TTL or an explicit destroy ends it), behavior=delete (when it
// ends, the keys it locks are deleted), and the configured lock-delay.
// Acquiring is one transaction, [lock KEY with the session, get KEY], so
// the fencing token, the ModifyIndex the lock wrote, is read atomically
// with the acquire. ModifyIndex is a Raft index, so it grows with every
// write to the cluster and is strictly greater for every new holder;
// LockIndex is not usable, it restarts at 1 when a key is deleted and
// re-created. Tokens go back only if the cluster's Raft log starts over (a
// dev agent restarted, a cluster rebuilt from nothing), which also loses
// every lock.
//
// Unlock is the transaction [check-session KEY, delete-cas KEY at the
// acquire's index]: it deletes the key only if it is still this hold's, so
// it can never free a later hold, not even one taken with the same
// session. An acquire whose caller cancels while it is on its way still
// waits up to a second for its answer (never past a deadline): a grant
// that arrives then is handed out. An acquire whose answer is lost all the
// same (a timeout, a broken connection) is undone if it was applied,
// before Lock returns (in the background when the agent does not answer
// within a second; the conformance case CancelAtGrant): the acquire
// writes a random nonce in the key's flags, and the key is deleted only if
// it still carries it. Renew renews the session (Consul returns the TTL it
// granted) and checks that the key is still the hold's.
//
// # Sessions
//
// By default the holds of a Locker share one session per TTL, so that many
// holds cost what one does: a Lock usually costs one round trip (the
// acquire transaction) and an Unlock one, and the watchdog renews every
// hold that falls due together with one renewal of the shared session and
// read-only transactions that check up to 64 of their keys each
// (driver.BatchRenewer): a renewal round of 100,000 holds is one session
// renewal and about 1,600 reads, not 100,000 renewals. A shared session
// whose renewal is due (a third of its TTL gone) is renewed before it backs
// a new hold, so a new hold has at least two thirds of its TTL ahead; one
// older than three quarters of its TTL is replaced by a new one, and the
// old one is destroyed once its last hold has ended.
//
// A shared session that ends (its TTL ran out because the process could
// not renew it, or it was destroyed from outside) deletes every key it
// locks, so every hold on it is lost, each with its own Done and
// ErrLockLost. Each hold keeps its own validity, the one a session of its
// own would give it: before every renewal of a shared session, the holds
// whose validity has run out (their owner stopped renewing them: autorenew
// off, or a watchdog that gave up) have their keys deleted and are marked
// lost, so that the renewals that serve the other holds never keep them.
//
// With session_per_hold=true (Config.SessionPerHold) every hold has a
// session of its own, renewed on its own: one lost session ends one hold.
// Between holds a session waits in a small pool (a quarter of its TTL at
// most) and backs the Locker's next hold, so a Lock still usually costs
// one round trip; a session older than that is destroyed rather than
// reused.
//
// # Waiting
//
// Consul keeps no queue of waiters for a KV lock, so the Locker keeps one
// in the KV store (the line; see queue.go). A Lock whose attempt is
// refused writes a ticket, an entry under PREFIX/.q/KEY/.w/ locked by
// the Locker's shared session (so a dead waiter's ticket goes with its
// session), in the same transaction that reads the line and the key; its
// place is the ticket's CreateIndex. Each waiter follows only the ticket
// just ahead of its own with a blocking query, and only the first in line
// follows the key: a release wakes one process, the one that can take
// the key, and no other. Its acquire deletes its ticket in the same
// transaction (delete-cas: a ticket gone refuses the attempt and the
// waiter writes a new one), which wakes the next in line. A release of a
// hold taken through the line, or one that finds tickets standing, sends
// the Locker's next Lock of the key to the back of the line instead of
// letting it take the key back from the first in line. The Locks of one
// Locker share one ticket per key, so a process gets one turn per round
// of the line. A Lock that gives up deletes its ticket. The waiter
// renews its session while it waits. No segment of a user key's path
// starts with '.', so the lines never meet a key.
//
// Lock-delay still applies: after a holder's session ends, the first in
// line meets it and retries with a backoff while the others sleep on.
// A process that was not in line (a TryLock, a Lock's first attempt when
// this Locker has seen no line lately) may still take a key that is free
// before the first in line does; it does not get in line ahead of anyone.
// With SessionPerHold there is no line (a ticket needs a session that
// lasts the wait): a Lock then waits on a blocking query on the key and
// every waiting process tries when it is freed, each attempt on a key
// this Locker recently failed to take preceded by a random delay of up to
// 1ms, halved for every attempt that failed in a row.
//
// # Inspect and Break
//
// The lock key's value is the holder's description (dlock.WithOwner),
// written by the acquire transaction. Inspect reads the key (held when a
// session has it locked; token = its ModifyIndex) and the session's TTL:
// Consul does not tell when a session was last renewed, so Remaining is
// that TTL, the validity a renewal grants. Waiters is -1. Break deletes
// the key with delete-cas at the index it read, whoever holds it, and
// leaves the session alone (destroying it would start a lock-delay that
// keeps the next holder out); the holder's monitor, or for an unmonitored
// hold its next renewal (every TTL/3), finds the key gone and closes Done
// with ErrLockLost, and the next lock writes a higher ModifyIndex.
//
// # Records
//
// Key K's record (driver.Recorder, with which a dlock.Semaphore records its
// number of permits) is the KV key prefix + "/~records/" + the encoded K,
// with no session: it never expires. The encoding writes "~" only before
// two hex digits, so no lock key is "~records" or under it, and locks,
// Inspect and Break never touch a record. Record is a check-and-set at
// ModifyIndex 0 (create if absent, through Raft): one round trip when it
// writes, and a second, a consistent read, when a record already exists.
// ClearRecord is a consistent read and a delete-cas at the ModifyIndex it
// read: two round trips. A record is lost only with the cluster's data: a
// dev agent (which keeps everything in memory) restarted, or a cluster
// rebuilt from nothing or restored from an older snapshot.
//
// # Time
//
// Consul accepts session TTLs from 10s to 24h; other TTLs are refused when
// the Mutex is made (driver.Limiter). The validity window is the TTL,
// measured from the moment the session was created or last renewed (for a
// shared session, or one reused from the pool, that is before the
// acquire). Consul never ends a session before its TTL, but may take up to
// twice the TTL to do so after its holder died: a successor may wait that
// long (plus the lock-delay). The conformance capabilities declare this as ExpiryGrace =
// TTL.
//
// # Minimum hold
//
// A hold with a minimum (dlock.WithMinHold) released early lapses
// (driver.Lapser): ReleaseAfter reads the key (is it still the hold's?),
// creates a lapse session (TTL the time left rounded up to whole seconds,
// at least Consul's 10s minimum; behavior=delete; no lock-delay; never
// renewed) and hands the key over in one transaction [check-session,
// check-index at the hold's token, unlock with the hold's session, lock
// with the lapse session], keeping its value. Three round trips. The lapse
// session is not the Locker's, so Close, which destroys the Locker's
// sessions, leaves it and the key alone. When Consul ends it, the key is
// deleted and the waiters' blocking queries wake, as after a crash, with
// no lock-delay. Consul ends a session no sooner than its TTL but, as
// said above, may wait up to twice the TTL (the dev agent and current
// servers always do): a key given a lapse of d stays held from
// max(d, 10s) up to 2 x max(d, 10s). A hold that is no longer the key's
// (broken, expired) is left alone and ErrNotHeld returned. If the
// hand-over fails (the agent does not answer), the key stays with the
// hold's session: a session of its own is no longer renewed and ends
// within its TTL (at least the minimum hold); a shared one deletes the key
// at its sweep once the time has passed, or at Close if that comes first.
//
// # Lock-delay
//
// When a session ends while it holds a key (its TTL ran out, or it was
// destroyed from outside), Consul refuses to lock that key again for the
// session's lock-delay. It is there for the holder that lost its session
// without knowing: it gives it time to notice and stop before someone else
// can take the lock. Unlock never triggers it (the key is deleted before
// the session is reused or destroyed). With dlock the validity window
// already ends before Consul can expire a session, and the monitor below
// notices a destroyed session at once, so the lock-delay matters mainly for
// holds that are not monitored and for programs that ignore Done; it costs
// every takeover after a crash that much more waiting. Nothing announces
// the end of a lock-delay, so a waiter that meets one retries with an
// exponential backoff from 10ms up to the lock-delay.
//
// Consul checks the lock-delay when it receives an acquire, before the
// raft commit; the commit itself only checks that the key is free. An
// acquire received while the key was still held, and committed right after
// the holder's session ended, would take the key inside the lock-delay (a
// waiter's attempts are sent while the key is held: the one that follows
// setting up its watch, and every TryLock). So an attempt on a key this
// Locker saw held in the last 2s carries a check-index of the index it saw
// in the same transaction: if anything changed the key since, the attempt
// fails; when the key is then free, one more attempt goes out, received
// after that change and so after any lock-delay it started. Another
// Locker's acquire and loss both falling inside one attempt's round trip
// is the window that remains, as with Consul's own api.Lock.
//
// # Loss
//
// A hold's Done closes as soon as its key is deleted or changes hands:
// each hold is watched by a blocking query on its key (the monitor), so
// Done closes within a round trip when the session is destroyed from
// outside or the key is deleted or overwritten. Each monitor holds an HTTP
// connection, and Consul accepts only 200 connections per client address by
// default, so at most `monitors` holds of a Locker (64 by default) are
// monitored at a time; the others, and all holds with monitors=0, learn of
// the loss at their next renewal (every TTL/3) or when the portable
// watchdog gives up at the end of the validity window.
//
// # Connections
//
// A Locker made by Open or NewFromConfig has clients of its own: at most
// 32 connections for ordinary requests, plus one per monitor and per key
// being waited for, idle ones closed after 3s, all closed by Close. A
// Locker made by New uses the caller's client as it is and leaves its
// connections alone on Close.
//
// # Benchmarks
//
// Against the dev agent of the consul topology (make up; 2 shared cores,
// heavily loaded by other work, so the figures vary from run to run by a
// factor of two or more; compare within one run only), dlock against the
// client's own api.Lock, both with a 15s session TTL:
//
//	set -a; . .dlock/endpoints.env; set +a
//	go test -run '^$' -bench VsAPILock -benchtime 800x ./backend/consul/
//
// Three runs of 800 acquisitions each gave (ranges over the runs):
//
//	                                  dlock               api.Lock
//	Uncontended Lock+Unlock           1.5-2.6 ms          3.1-3.9 ms
//	Contended, 8 goroutines, one key, 1 ms hold:
//	  8 Lockers (8 clients)   p50     3.2-4.2 ms          1.7-1.8 ms
//	                          p99     22-41 ms            14-46 ms
//	                          max     37-182 ms           0.9-4.9 s
//	          acquisitions max/min    1.37-1.45           537-779 (min 1)
//	  2 Lockers, 4 each       p50     1.4-2.4 ms
//	                          p99     8-41 ms
//	          acquisitions max/min    1.00-1.08
//
// Uncontended, a dlock Lock+Unlock is two writes (the acquire and release
// transactions, on the shared session); api.Lock creates a session, reads the
// key, acquires, releases and destroys the session. Contended, api.Lock's
// low median is the releasing process taking the lock straight back before
// the others' blocking queries return: one contender got nearly every
// acquisition while another got one, and some handoffs took seconds.
// dlock's handoffs go round the contenders in the order they fell in line
// (see Waiting), which costs a round trip or two of median.
package consul
