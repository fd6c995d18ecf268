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
// and dlock.Open's ttl= (at most MaxTTL, 10 years; a longer TTL is
// refused with dlock.ErrInvalidOption when the Locker or Mutex is made)
// and autorenew=. Anything else is an
// ErrInvalidURL error. [New] takes N *redis.Client values the caller
// already has (standalone or Sentinel failover clients, one per
// independent master) and a [Config].
//
// # Keys
//
// Under prefix P, the user key K is, on every instance:
//
//	P + "l:" + K   the lock: value = the hold's owner ID, expiry = the lease
//	P + "t:" + K   the fencing counter (never expires)
//	P + "r:" + K   the channel releases are published on when nobody is in
//	               line (for Watch: observers such as dlock.Election's)
//	P + "w:" + K   the line: a sorted set of the members of waiting
//	               Lockers, in line by the score each sends
//	P + "e:" + K   its entries: member -> deadline:ttl:inbox:description
//	               (both expire with their last refreshed entry)
//	P + "i:" + I   the channel a Locker with inbox I is woken on (one per
//	               Locker, whatever the key)
//	P + "m:" + K   "owner\ndescription" of the last hold (dlock.WithOwner),
//	               written by the acquire script; never expires
//	P + "c:" + K   the key's record (see Records); never expires
//
// Redis names are binary safe and a Redlock instance is a plain master,
// never a Cluster, so K is used as is ("a/b", "{", "\x00nul", 4 KiB keys):
// behind a fixed prefix and a fixed-length tag the mapping is injective.
//
// # Acquire
//
// One attempt (TryAcquire) sends the acquire script to every instance at
// once. Requests of concurrent callers to one instance share pipelines
// ("multiplexing", in the words of the Redlock page), so a burst of a
// thousand acquires costs a few round trips per instance. A pipeline
// carries at most 256 requests besides releases, releases first,
// renewals after every other kind: when the renewals of many thousands of
// holds fall due together, an acquire or a release goes out in the next
// pipeline instead of waiting behind them all, and no pipeline keeps an
// instance busy past the timeout. Once a renewal has waited 50ms in the
// queue the order turns round for acquires: the instances (or this
// client) are not keeping up, and the renewals of the locks already held
// go before them, acquires getting the room they leave: new Locks slow
// down, or fail with ErrUnavailable, before holds are lost under their
// holders. Releases still go first (each is one hold less to renew), and
// an Unlock does not wait for the renewal batch its hold is in (the
// renewals are owner-checked, driver.OwnerCheckedRenewer). When the
// renewals alone exceed what the instances can do, holds are lost all the
// same (100,000 holds at a 3s TTL on the 2 cores of BENCHMARKS.md, which
// the client and five instances share, are at that edge: of two runs at
// the same code one lost 27,550 while it acquired, the other none), and
// in waves rather than
// one at a time: a renewal queued past its hold's validity counts for
// nothing, and the holds due with it are just as late. Size the instances
// for the renewals: each hold is renewed three times per lease, and each
// renewal cost the five instances' main threads about 14.5µs of CPU
// together on the development machine (go test -run '^$' -bench
// 'RenewBatch$' ./backend/redlock/, srv-ns/hold), so 100,000 holds at a
// 3s lease ask about 1.45 cores of them. Renewals cost
// one script call per 256 holds, not one per hold: the portable layer
// renews the holds that fall due together through RenewBatch, which sends
// each instance RenewMany calls that check and extend each key as the
// renew script would, and single renewals queued together are folded into
// one such call. Each request has
// the per-instance timeout to be answered, counted from the moment it is
// sent (a busy client does not mistake its own queue for a slow instance;
// a request queued behind one an instance has left unanswered that long is
// given up at once). The attempt returns as soon as a majority (N/2+1)
// granted the lock, so a paused or slow instance costs nothing then, and
// never more than the timeout; the requests not answered yet still run,
// and a grant that arrives after the hold has ended is released at once.
// After a request to an instance times out, a connection to it is set up
// in the background with a deadline of its own (warmTimeout, 5s): go-redis
// sets a connection up inside the first request's context, and on a link
// whose round trip is a fair part of the timeout every request would
// otherwise time out during the set-up and none would be answered.
// The timeout must still exceed the round trip: on a 200ms link the
// default 100ms grants nothing.
//
// At most 64 acquire attempts of one Driver are out at once (maxInFlight);
// the others wait for a turn, before anything is sent, so their wait is
// not counted against their validity. A burst of 5,000 Locks through one
// Locker otherwise queued about a thousand acquires of this client on each
// instance ahead of every new request, and a third to a half of the
// burst's Locks failed, their instances past the timeout
// (TestBurstKeepsHolds).
//
// The hold is granted if a majority took the lock and the whole exchange
// (both token phases) ended within the validity window, TTL - TTL*drift -
// 2ms, measured from before the first request was sent. The lease's
// Expires is that same instant plus the validity: elapsed time is never
// counted twice and never forgotten.
//
// When the attempt fails, the lock is released, in parallel, on every
// instance where it is or may be ours (those that granted it or did not
// answer; the ones that refused cannot hold it), and the error says why:
//
//   - fewer than a majority answered at all: an error matching
//     dlock.ErrUnavailable (quorum unreachable);
//   - the others hold it: a *driver.HeldError (dlock.ErrNotAcquired)
//     carrying how long until enough of their leases run out for a
//     majority to be free (the (N/2+1-free)-th shortest PTTL), plus a
//     random part, so that waiters woken by expiry do not retry together.
//
// Waiting is a line on every instance, and a release hands the lock over
// to the first waiter in it, not to a herd. A waiting Lock
// (driver.LockWatcher) stands in line on each instance that refused it: a
// member (its Locker's inbox and a number) in the sorted set P+"w:"+K,
// with an entry that lives one lease from its last refusal (the waiter
// refreshes it at least every third of one). The member's score is chosen
// by its Locker and sent to every instance: when its Lock began waiting,
// on its own clock. So the instances order their lines alike, whatever
// order the attempts reached them in, and a release makes the same member
// first on each of them; the inbox is subscribed once per Locker and
// instance, so a wait costs no SUBSCRIBE.
//
// A release hands the lock over where it deletes it: the lock is set to
// the first live member, with a fencing token made as an acquire makes
// one, for one whole lease from then, and "member:token:elapsed:attempt"
// is published on that member's inbox, elapsed being the ms of the
// instance's clock since the member's last refresh there and attempt the
// ID of the attempt that made that refresh. The releaser
// sends every instance the same token floor, a little ahead of its clock,
// so they all grant the same token. The waiter holds the lock once a
// majority granted it, without a request of its own (phase 2 only when
// the tokens differ): its validity window starts when it sent the
// attempt that made its last refresh, plus the shortest elapsed time of
// those grants less the 1% clock-rate allowance and a millisecond of
// rounding, and ends TTL*drift + 2ms before the end of that lease, as an
// attempt's does. Each grant's lease was set at least that late: the grant
// came elapsed after a refresh that ran after the attempt was sent. A
// grant counts only when it names the member's last attempt, from an
// instance that refused that attempt to another holder. One that names an
// earlier attempt is a grant heard late (its waiter was paused, say, and
// attempted again on resuming): its lease may have run out and the lock be
// someone else's, so it is given back, never counted from the later
// attempt (fault cell 17 of FAULTS.md).
//
// The lock is never free between two holders, so the releaser's next Lock
// (or anyone's TryLock) is refused and goes to the back of the line: a
// contended key is taken in the order of the line, and an acquisition
// costs the release and one refused attempt, not a race that every woken
// waiter pays for. Anyone may still take a lock that nobody holds, as in
// the Redlock algorithm.
//
// A grant nobody hears is undone: a release that finds nobody subscribed
// to the member's inbox (its process is gone) frees the lock again (the
// token stays spent) and hands it to the next live member. Grants from
// fewer than a majority make no hold: a waiter that has some and no
// majority two per-instance timeouts after the first gives them back (its
// release of each hands it to the next member in line there) and waits on
// as a new member in the same place, with an attempt that takes the lock
// where it is free.
// A grant to a member whose wait has ended is handed on the same way,
// unless that member holds the lock from grants that came first (the
// late grant is then part of that hold: renewals and the release go to
// every instance). A waiter that is not woken still retries when the
// holder's lease it was told of runs out, so a lost message costs time,
// never the lock; a grant whose message is lost, to a waiter that is
// alive, holds that instance for one lease. Within one Locker the
// portable layer lets only one caller per key talk to the servers, so
// only the waiting Lock claims its member's grants.
//
// Watch, for observers, subscribes to the key's release channel on every
// instance and is woken by every release made while nobody is in line, by
// every Break, and when a pub/sub connection breaks.
//
// The random retry delay of the Redlock algorithm is applied where it
// matters: when no single owner holds a majority (several clients split
// the instances between them), the losing attempt releases what it took
// with a release message and sleeps a random delay of up to twice its own
// round trip before reporting, so contenders do not retry in lockstep.
// When one owner clearly holds a majority, partial locks are removed
// without a message, since only that owner's release can free the key.
// Otherwise the portable layer's wake-up on release messages, or on the
// reported remaining lease, replaces a fixed retry delay.
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
// T. Phase 2 is a second round trip only when the counters of the first
// majority to answer disagree. Each acquire carries a floor of its own, the
// client's clock plus 250ms: when the floor is above every instance's
// counter and clock, the instances that grant all set their counter to
// it, and phase 2 is not needed. Otherwise (clients whose clocks are
// behind the instances', acquisitions faster than the clock moves, an
// instance that missed acquisitions while it was down or slow) phase 2
// raises the counters behind to T, so they agree again.
//
// Each instance's counter is also floored at that instance's clock: phase
// 1 sets it to max(counter + 1, TIME in microseconds), as the redis backend
// does. Quorum intersection alone needs every instance to keep its
// counter; the floor covers an instance whose counter is missing or older
// than the tokens it took part in (a restart without persistence, a
// restart from an older RDB snapshot, a crash that lost the tail of the
// AOF), even when a later majority meets the last one only on instances
// that went back. Then the token is above every token issued before as
// long as one key is not taken more than a million times a second and no
// instance that answers has a clock behind the clock that issued the last
// token by more than the time since (the one assumption left; no test
// steps a clock). Backed by TestFaultRestartEmptyMajority (counters
// lost), TestFaultSnapshotRollback (every master restarted from a snapshot
// older than the last three acquisitions) and fault cells 7c and 7d of
// FAULTS.md. Exclusion across such a restart needs the Redlock page's
// rule: keep a restarted instance out for longer than the longest TTL, so
// that it forgets no lock that is still held; without it a second holder
// can get the lock (the cells' unfenced rows show it). Redlock has no
// replicas, so there is no failover: an instance that is down is one of
// the minority the quorum tolerates (cells 7a, 7b). Counters are kept
// forever (one small string per key ever locked).

// # Renew, release
//
// Renew extends the lock (compare-and-PEXPIRE) on every instance where it
// may still be ours, in parallel; it succeeds once a majority extended it.
// When a majority can no longer be reached even counting instances that
// did not answer, the hold is lost (ErrLockLost) and Done is closed; when
// it is only unknown, the error matches ErrUnavailable and the watchdog
// tries again until the validity window closes, then closes Done: before
// the lease can end on the servers. Release deletes the lock
// (compare-and-delete) on every instance where it may be ours, in
// parallel, wakes the first waiter in line where it did, and returns once a
// majority deleted it. A release waits ten per-instance timeouts for each
// instance (releasePatience): nothing is counted against the time it
// takes, but one given up on too early leaves the key locked where it went
// unanswered, and the next holder waits for the lease to run out
// (TestReleaseAnsweredLateReleases). The release and renew scripts are the single-Redis
// backend's (internal/redislua); acquire and fence are this package's.
//
// # Inspect and Break
//
// Inspect runs internal/redislua's read-only inspect script on every
// instance in parallel and reports what a majority says: the key is held
// when one owner holds it on a majority; its token is the counter value on
// a majority of instances (acquire leaves it there); the lease left is the
// majority's shortest; its description is the metadata written with that
// owner's lock. Waiters counts the live members of the longest line. Break
// runs the same script in its breaking mode on every instance: the lock and
// its metadata are deleted whoever holds them, the counters are kept (so
// the next token, the largest counter of a majority plus one at least, is
// higher) and the first waiter in line is woken (with nobody in line, a
// release is published). The broken holder's next renewal (every TTL/3) finds no
// majority and reports ErrLockLost. Both need a majority of answers, else
// they fail with ErrUnavailable.
//
// # Records
//
// The driver is a driver.Recorder (a Semaphore records its number of
// permits with it), with one record per instance, P + "c:" + K, never
// expiring and never touched by the lock scripts (Lock, Unlock, Break and
// expiry leave it alone; Inspect does not see it). Record runs
// internal/redislua's create-if-absent script on every instance in
// parallel (one round trip, bounded by the per-instance timeout) and
// returns the value a majority of all N instances hold (N/2 + 1 of them,
// counting those that did not answer as against); when no value has such a
// majority, because too few instances answered or because concurrent
// Records with different values split the instances, it fails with
// ErrUnavailable. Instances that answered keep what they hold; a later
// Record returns the majority's value once there is one. ClearRecord runs
// the compare-and-delete script on every instance and reports whether any
// deleted the value; fewer than a majority of answers is ErrUnavailable.
// Redlock's majority rule is what keeps a record: it survives the loss of
// any minority of instances, and is lost (a later Record may write its
// own value) once the instances still holding it are no longer a majority:
// an instance restarted without persistence counts as one that never had
// it, as do instances that were down when it was written.
//
// # What it promises
//
// The dlock promises hold under Redlock's own assumptions: bounded clock
// drift between the client and the instances (the drift factor), and
// instances that keep their data (see above) and never evict it (run them
// with maxmemory-policy noeviction; this package does not check). It
// survives the loss of any minority of instances: with 2 of 5 down, locks
// are granted and exclude each other; with 3 of 5 down, Lock and TryLock
// fail at once with ErrUnavailable and a hold taken before is reported
// lost while its lease still runs. Exclusion inside the validity window is
// Redlock's guarantee and no more: a client paused past its lease, or a
// clock that jumps, can overlap with the next holder, which is why the
// fencing token exists. A protected resource that checks tokens (package
// fence) stays safe even then.
//
// [Driver.Stats] counts, per instance, the requests sent and those that
// failed or timed out.
//
// # Benchmarks
//
// One run compares, on the same machine and the same five Redis 7.0
// masters (the redlock topology): Redlock through dlock over the five; the
// redis backend (backend/redis) through dlock on the first of them; and the
// bare commands, SET NX PX then a compare-and-delete script, on one
// instance and on five in parallel (a goroutine per instance):
//
//	go test -run '^$' -bench 'Conformance|SingleRedis|Commands|Bare' -count 3 ./backend/redlock/
//
// Medians of three runs (range in brackets), on the two-core development
// machine while other builds and tests ran (load average 2-4):
//
//	Lock+Unlock, one goroutine        redlock-5   399µs [383-416]   (Conformance/five/Uncontended)
//	                                  redis-1     134µs [130-134]   (SingleRedis/one/Uncontended)
//	bare SET NX PX + compare-and-del  5 parallel  382µs [361-411]   (Bare/5)
//	                                  1           121µs [92-122]    (Bare/1)
//	contended handoff (8 goroutines,  redlock-5   p50 0.85ms [0.67-0.89]  p99 4.1ms [2.6-8.3]  390 acq/s
//	2 Lockers, 1ms hold)              redis-1     p50 0.21ms [0.21-0.29]  p99 0.5ms [0.4-0.6]  692 acq/s
//	commands per acquisition          redlock-5   uncontended 44.6 (9.9 scripts), contended 102 (21.3 scripts)
//	(INFO commandstats, all           redis-1     uncontended 7 (2 scripts),     contended 14.4 (3.6 scripts)
//	instances, script-internal
//	commands included)
//
// The goal of at most 1.5 times the single-instance latency is not met on
// this machine (3.0 times), and cannot be: the bare five-way fan-out alone
// costs 3.2 times one bare round trip, since five server processes and the
// client share two busy cores. Redlock through dlock is as fast as that
// bare fan-out (it returns at the third answer and batches, which pays for
// dlock's own work), as the redis backend is as fast as one bare round
// trip: the cost is the fan-out, not the driver. On a machine with a core
// per instance, or instances on their own hosts, the fan-out runs in
// parallel and the ratio approaches that of the third fastest of five
// round trips to one.
//
// Those figures predate the line, its handover and the counter floor; the peer
// comparison in BENCHMARKS.md (make bench-peers) is current.
//
// Uncontended, an acquisition is 5 acquire scripts (SET NX PX, SET of the
// metadata, TIME, GET and SET of the counter, HDEL of the line's entry)
// and 5 release scripts (GET, ZRANGE, DEL, PUBLISH): about 55 commands
// against redsync's 20 (SET NX PX, and a GET and DEL script), the price of
// the fencing counter, the holder's description for Inspect and the wake
// line. Contended, a release hands the lock to one waiter, so the
// commands per acquisition do not grow with the waiters (TestWakeQueue-
// RequestsPerAcquisitionFlat): the release that grants it (GET, ZRANGE,
// TIME, HGET of the entry, GET and SET of the counter, SET of the lock and
// of its description, ZPOPMIN, HDEL, PUBLISH on each instance), and one
// refused attempt (the releaser's own next Lock, whose refusal puts it in
// line). With 8 worker processes that is 105 commands per acquisition in
// make bench-peers, against 157 when a release only woke the first waiter
// and the waiter then raced the releaser's next Lock with an attempt of
// its own, and about 200 when each instance woke its own first waiter.
//
// # Minimum hold
//
// A minimum hold (dlock.WithMinHold, driver.Lapser) released early sets
// the lock's expiry, owner-checked, on every instance where it is still the
// hold's, to what remains of it, rounded up to the millisecond; it succeeds
// on a majority as a release does. An instance that does not answer keeps
// the longer lease it had. An expiry publishes nothing: a waiter tries
// again at the remaining lease read on the instances that refused it, or at
// the latest at its queue entries' refresh.
package redlock
