// Package redis is dlock's backend for one Redis deployment: a standalone
// server, a primary with replicas behind Sentinel, or a Redis Cluster. It
// registers the URL schemes redis and rediss with dlock.Open; packages
// rediscluster (redis+cluster, rediss+cluster) and redissentinel
// (redis+sentinel, rediss+sentinel) register the others, so that a program
// links go-redis's Cluster and failover clients only when it imports them.
// New takes a go-redis v9 client the program already has, of any kind.
//
// # How a lock works
//
//   - Acquire: one Lua script sets the lock to the owner with PX ttl if the
//     key is free and nobody live is queued before this owner, and sets the
//     key's fencing counter to max(counter + 1, server TIME in
//     microseconds); the new value is the fencing token. Otherwise a Lock
//     joins the key's queue in the same script (TryLock does not), and the
//     script returns how long until that changes by itself (the holder's
//     remaining PTTL, or the first waiter's deadline). A Lock joins only
//     once its Locker's channel of the key is subscribed (after its first
//     refusal, or at once if a wait a moment ago left it subscribed), so
//     that no grant can come before it can be heard.
//   - The queue: a list of waiting owners, first in line first, and a hash
//     of their entries, each with a deadline one lease after the waiter's
//     last attempt. Every script drops entries whose deadline has passed
//     from the head of the line; a live waiter refreshes its entry every
//     TTL/3. A Lock that gives up (its context, Close, an error) removes
//     its entry before it returns, or in the background if the server
//     cannot be reached. A release skips a waiter that can no longer hear
//     it, where the server can tell (see Dead waiters).
//   - Release: a Lua compare-and-delete (only if the key still holds this
//     hold's owner value). When someone is queued, the same script hands
//     the lock to the first live waiter (with a token made as above, for a
//     whole lease) and publishes "owner:token:elapsed:attempt" on that
//     waiter's Locker's own channel of the key (see Keys): only that
//     waiter, in one process, wakes, and it needs no round trip to take
//     the lock. Where the server can tell, PUBLISH's count of receivers
//     says whether anyone heard: when nobody did, the script undoes the
//     grant, drops the waiter and tries the next (see Dead waiters). The
//     waiter's window counts from the sending of the attempt named
//     (the one whose refresh of the entry elapsed counts from), so a grant
//     heard late, after the waiter attempted again (it was paused, say),
//     is not counted from that later attempt: the waiter attempts once
//     more and finds the lock still its own, with what is left of the
//     lease, or someone else's (fault cell 17 of FAULTS.md). A holder
//     whose lease expired and was taken over can never delete its
//     successor's lock.
//   - Renew: a Lua compare-and-PEXPIRE, called by dlock's watchdog about
//     every TTL/3. The holds of a Locker that fall due together are
//     renewed in one pipeline; on one server (standalone or Sentinel) the
//     holds of one lease share a script call, up to 128 of them, with the
//     same check for each key. With 100,000 holds at a 3 s TTL that cut
//     the server's CPU by about a quarter and the client's by about a
//     third, against a script call per hold (which a Cluster keeps: its
//     locks are in different slots).
//   - Waiting: the waiters of a Locker share one pub/sub connection (on a
//     Cluster with Redis 7, one per master, with sharded pub/sub:
//     SSUBSCRIBE/SPUBLISH), each Locker on its own channel of the key. A
//     waiter is woken by its grant, or by its timer at
//     the holder's remaining lease (expiry publishes nothing), at the first
//     waiter's deadline, or at its own refresh. There is no polling at a
//     fixed interval. A key's subscription stays 10 s after its last
//     waiting Lock, so that a key contended again needs no new SUBSCRIBE.
//   - A grant sets a whole lease when the release runs, and tells the
//     waiter how many ms of the server's clock passed since the waiter's
//     last refused attempt ran. The granted hold's validity window starts
//     when that attempt was sent plus that time (less 1% and 1 ms), so a
//     grant arrives with about a whole lease left, as an acquire does,
//     even on a link with a long round trip.
//
// The scripts are embedded from internal/redislua and run with EVALSHA,
// falling back to EVAL when the server does not have them cached.
//
// # Keys
//
// A user key K under prefix P becomes these Redis names with one hash tag,
// so that they live in one Cluster slot:
//
//	{P:K'}:lock       the lock: value = owner of the hold, expiry = the lease
//	{P:K'}:fence      the fencing counter (never expires)
//	{P:K'}:meta       "owner\ndescription" of the last hold (dlock.WithOwner),
//	                  written by the acquire script; never expires
//	{P:K'}:queue      the waiting owners, first in line first (a list)
//	{P:K'}:deadlines  owner -> "deadline-ms:ttl-ms:I:description" (a hash);
//	                  both queue keys expire one lease after the last
//	                  waiter's last attempt
//	{P:K'}:release    the channel releases are published on when nobody
//	                  is queued, and breaks with nobody queued
//	{P:K'}:release:I  Locker I's own channel of the key (I: 16 random hex
//	                  digits per Locker), on which its queued waiter is
//	                  woken and granted the lock
//	{P:K'}:record     the key's record (see Records); never expires
//
// K' is K with '%', '{' and '}' percent-encoded, so that the mapping is
// injective and a brace in a key cannot move the hash tag. LockKey gives the
// lock's name, for operators. Each key ever locked leaves its counter behind
// (a small string); this is what keeps tokens increasing, and its last
// holder's description (at most 1 KiB plus the owner ID).
//
// # Records
//
// The driver is a driver.Recorder (a Semaphore records its number of
// permits with it). A key's record is the string {P:K'}:record, in the
// key's Cluster slot, without expiry. Record is one script (record.lua: GET,
// and SET when absent), ClearRecord one compare-and-delete script
// (clearrecord.lua): one round trip each, plus a WAIT with wait_replicas
// (too few acknowledgements are an ErrReplicas error; the record stays
// written). No lock script reads or writes it, so Lock, Unlock, Break and
// expiry leave it alone and Inspect does not see it. Like a lock, a record
// can be lost by Redis itself: a failover to a replica that had not
// received it (asynchronous replication; wait_replicas narrows this), a
// restart of a server without persistence, or eviction on a server
// allowed to evict (allow_eviction). A lost record is written again by the
// next Record, with that caller's value.
//
// # Dead waiters
//
// A Locker's waiters are subscribed to its own channel of the key before
// they queue, and stay subscribed while queued. A release asks whether
// the first waiter in line can hear it: the PUBLISH (SPUBLISH) of its
// grant returns how many connections received it, and when that is none,
// the same script undoes the grant (the token it took stays spent, so
// tokens still increase), drops the waiter's entry and hands the lock to
// the next live waiter in line, or leaves it free when none is left
// (with wait_replicas, which grants nothing, it wakes the next one
// instead). So a waiter whose process is gone, exited or killed (its
// operating system closes its connections, and the server then counts
// no subscriber), never gets a grant: the key goes to a live waiter, or
// is free, the moment it is released (TestQueueKilledWaiter); a
// semaphore waiter, queued on every permit slot, takes none of them
// (TestSemaphoreKilledWaiter). The server can tell on a standalone
// server, on Sentinel's primary (the failover client subscribes there)
// and on a Cluster with sharded pub/sub (Redis 7: waiters subscribe on
// the master of the key's slot, where the release runs).
//
// A dead waiter that no release skips holds the line for at most its TTL
// after its last refresh, plus one lease when a release grants it the key
// in that time: the grant sets a whole lease (the waiter's TTL) from the
// release, which nobody renews or releases. So the waiters behind it get
// the key at most two of its TTLs after its last refresh, which was at
// most TTL/3 before it died; a semaphore waiter can take, in that time,
// every permit slot released. That is the case of:
//
//   - a waiter whose connection the server still counts as subscribed: a
//     process that hangs (stopped, paused, swapping) but has not exited,
//     or a host that vanished without closing its connections (power
//     loss, a partition) until the server's TCP keepalive closes them
//     (tcp-keepalive: several minutes by default);
//   - a Cluster without sharded pub/sub (a master older than Redis 7): a
//     PUBLISH reaches every node, but counts only the receivers connected
//     to the one it ran on, so the release does not ask; and a Cluster
//     client that subscribes on replicas (ReadOnly, RouteByLatency,
//     RouteRandomly);
//   - on any server, no release at all: the holder died too, its lease
//     runs out (an expiry publishes nothing), and a dead waiter first in
//     line holds it until its entry runs out, at most its TTL after its
//     last refresh.
//
// A live waiter whose subscription broke and is being made again (the
// connection dropped) cannot hear either: a release in that moment drops
// it too, and it queues again, at the back, at its next attempt. That
// costs it its place in line, never exclusion.
//
// # Inspect and Break
//
// Inspect runs one read-only script on the lock's node: the lock's owner
// and PTTL, the counter (the holder's token: it only moves when a lock is
// granted) and the metadata, shown only while the owner it names holds the
// lock, and Waiters, the live entries of the key's queue. Break runs the
// same script in its breaking mode: it deletes the lock and its metadata,
// whoever holds them, keeps the counter (so the next token is higher) and
// the queue, and wakes the first waiter so that it tries at once. The broken holder's next renewal
// (every TTL/3) finds the lock gone and reports ErrLockLost. On a Sentinel
// setup the scripts run on the primary, as every other script does.
//
// # Fencing tokens
//
// Every acquisition sets the counter to max(counter + 1, the server's clock
// in microseconds since 1970) and returns that. A counter that is present
// and current gives the next integer; a counter that is missing or older
// than the tokens already issued (a restart without persistence, a restart
// from an older RDB snapshot, a crash that lost the tail of the AOF, a
// failover to a replica that missed the last increments) is overtaken by
// the clock, so tokens never repeat or go back. The one assumption: the
// server's clock does not step back by more than the time since the key
// was last acquired (and one key is not acquired more than a million times
// a second). Tokens pass through Lua numbers, exact below 2^53: a
// clock-based counter stays below that until the year 2255.
//
// Backed by TestTokensIncreaseAcrossRestart (no persistence),
// TestTokensIncreaseAfterSnapshotRollback (SAVE, three more acquisitions,
// SHUTDOWN NOSAVE, restart from the snapshot), the internal/redislua tests,
// and the fault cells 6, 6b (snapshot), 11 (Sentinel failover) and 12
// (Cluster failover) of FAULTS.md.
//
// # URL
//
//	redis://[user:password@]host[:6379][/db][?params]
//	rediss://...                                   (TLS)
//	redis+cluster://[user:password@]h1:7000,h2:7001,h3:7002[?params]          (package rediscluster)
//	redis+sentinel://[user:password@]s1:26379,s2:26379[/db]?master_name=NAME[&params]  (package redissentinel)
//
// Parameters of this backend:
//
//	prefix=dlock          key prefix (no '{' or '}')
//	wait_replicas=0       after each acquire and renew, WAIT for this many replicas
//	wait_timeout=500ms    how long WAIT may take (only with wait_replicas)
//	allow_eviction=false  accept a maxmemory-policy other than noeviction
//
// plus dlock's ttl (at most MaxTTL, 10 years; a longer TTL is refused with
// dlock.ErrInvalidOption when the Locker or Mutex is made) and autorenew,
// and every go-redis URL option
// (dial_timeout, read_timeout, write_timeout, pool_size, client_name,
// protocol, max_retries, skip_verify, ...). Any other parameter is an
// error matching dlock.ErrInvalidURL. Clients made from a URL honour the
// caller's context deadline.
//
// # Checks at open, and after
//
// Open and New read INFO from the server (every master of a Cluster). A
// server that does not answer before the context ends is ErrUnavailable.
// A maxmemory-policy other than noeviction (allkeys-* or volatile-*, and
// every lock key has an expiry) is refused with ErrEvictionPolicy unless
// allow_eviction=true: an evicted lock lets a second holder in.
//
// The policy is read again (one INFO per master, never on every acquire)
// on the first acquire after the client connected to a server it had not
// seen (a Sentinel failover, a promoted Cluster replica, a new Cluster
// node), after a renewal or release found its key gone on a server that
// may evict, and at most a minute after the last check (a CONFIG SET on a
// server already in use). An acquire that finds a bad policy is undone and
// fails with ErrEvictionPolicy; a renewal or release that finds its key
// gone on such a server fails with an error that matches both
// dlock.ErrNotHeld (dlock.ErrLockLost from the Mutex) and ErrEvictionPolicy
// and says eviction is the likely cause (TestEvictionPolicySetAfterOpen,
// TestEvictionPolicyAfterFailover, TestEvictionPolicyRecheckedPeriodically).
//
// # What it promises, honestly
//
// Within one Redis deployment, and while the server keeps its data, the
// dlock promises hold: exclusion within the validity window, fencing tokens
// that increase, and a loss signal when renewal fails. They do not survive
// everything:
//
//   - A restart without persistence (or with fsync not "always"), or from
//     an older snapshot, forgets the locks taken since: a second holder can
//     get a key while the first still believes it holds it (fault cells 6
//     and 6b show the overlap). Fencing tokens still increase (see above),
//     so a resource that checks them rejects the old holder.
//   - Replication is asynchronous. If the primary fails over (Sentinel or
//     Cluster) to a replica that does not have the lock, the new primary
//     does not have it, and a second holder can get it (fault cells 11 and
//     12, unfenced); tokens still increase (their fenced cells). Set
//     wait_replicas (WAIT after every acquire and renew) to make a granted
//     lock exist on that many replicas; an acquire they do not confirm in
//     wait_timeout is undone and fails with ErrReplicas, and a renewal they
//     do not confirm fails, so the holder's Done closes before its last
//     confirmed lease ends. With one replica and wait_replicas=1 a Sentinel
//     failover then keeps exclusion (fault cell 12, wait_replicas=1). WAIT
//     is not consensus: with more replicas than wait_replicas the promoted
//     one may be one that did not acknowledge, and a replica that
//     acknowledged and then restarted without persistence has forgotten;
//     neither is tested. For safety under failures use a consensus store
//     (etcd, ZooKeeper, Consul) and fence the resource.
//   - On a Cluster, an unavailable node makes the client reload the slot
//     map at once, so the clients find a promoted replica within seconds
//     (fault cell 13 requires it within 3 s of the promotion), not at
//     go-redis's periodic reload.
//   - The server's clock: see Fencing tokens for tokens. Leases expire by
//     the server's wall clock; a step of it is not tested.
//   - A key taken from outside (DEL, FLUSHDB) is noticed at the holder's
//     next renewal, within TTL/3.
//   - An acquire whose reply is lost (a timeout after the request was
//     sent) is undone in the background by the guarded release, tried again
//     after 100 ms and 1 s in case a stalled server runs the request late.
//     This is best effort: a server that stalls longer keeps that lock
//     until its TTL runs out (nobody holds it; it only delays others).
//   - Waiters are served in the order they queued on the server, across
//     Lockers and processes (TestQueueFIFO); within a Locker, waiters for
//     one key are served one at a time by dlock, so a Locker has at most
//     one queue entry per key. A Locker of a version before the queue
//     ignores it (it takes a free key whoever waits), so mixed versions on
//     one key lose the order, not exclusion (by construction: every
//     script sets the lock only when it is free; not tested).
//
// A value that this backend did not write at a lock key (a hash, a string
// without expiry) is reported as ErrNotALock; nothing is changed.
//
// # Benchmarks
//
// Measured with Redis 7.0.15 on loopback, on a 2-core machine shared with
// other builds (load average 7-8 during the run, so absolute times are
// inflated and noisy; the paired ratios are the figures to read), three
// runs each:
//
//	make up TOPOLOGIES="redis redis-cluster"; set -a; . .dlock/endpoints.env; set +a
//	go test -run '^$' -bench 'LockUnlock|Contended|Conformance' -benchmem -count 3 -benchtime 2s ./backend/redis/
//
// Uncontended Lock+Unlock against the bare textbook lock (SET NX PX, then a
// Lua compare-and-delete), with this driver alone (TryAcquire+Release,
// without the portable layer) in between, the three rotated in one loop
// (BenchmarkLockUnlock/standalone/paired, -benchtime 2s, six runs on the
// 2-core machine, load average 3-6, each run beside one of the version
// before the 5-command acquire, in turn):
//
//	              dlock        driver alone  bare         dlock/bare  driver/bare
//	standalone    134-168 µs   125-152 µs    108-133 µs   0.77-0.83   0.83-0.88
//	(before)      139-173 µs   130-159 µs    109-131 µs   0.76-0.82   0.82-0.87
//
// All three make two round trips. An uncontended Lock+Unlock costs the
// server 11 commands (INFO commandstats, the scripts' inner commands
// included), against 4 for the bare lock and 13 before:
//
//   - the acquire (queue.lua): EVALSHA, LINDEX of the queue (nobody
//     queued), SET NX PX of the lock, TIME, GET of the counter, and one
//     MSET of the counter and the holder's description;
//   - the release (release.lua): EVALSHA, GET of the lock (owner-checked),
//     LINDEX of the queue (nobody to wake), DEL, and PUBLISH on the key's
//     release channel (for Watch).
//
// TestUncontendedCommands holds that count. Each remaining step is a
// promise: the queue's order (goal 1), the clock floor that keeps tokens
// from repeating after a failover or a restore from an older snapshot (a
// counter alone repeats them), Inspect's description, Watch's wake-up.
// Fewer commands did not move the ratio much: the inner commands cost the
// server about 2 µs per Lock+Unlock in all (their usec in commandstats),
// while each script call costs 10 to 12 µs (evalsha usec per call, the
// inner commands included), against 3 to 5 µs for the bare lock's
// compare-and-delete; the acquire and release scripts take six keys and
// six or seven arguments each, which the server parses and hands to Lua.
// Server CPU (INFO cpu) per Lock+Unlock was 56-65 µs against 43-48 µs
// for the bare lock (59-70 µs before), most of it the system calls of
// two round trips. The rest of the gap is client CPU: the portable layer
// (dlock less driver alone above) and the driver's longer commands and
// replies (76 allocations per cycle against 20 for the bare lock).
//
// Contended across processes, from BENCHMARKS.md (make bench-peers: one
// key, each worker its own OS process with its own client, 1 ms hold, 2 s
// per run, medians of 3; Redis 7.0.15, the 2-core machine, nothing else
// running):
//
//	workers  system            acq/s  wait p99  handoff p99  max/min  cmds/acq  µs/acq  CPU µs/acq  RT/acq
//	2        bare SET NX spin  742     41.6 ms    9.14 ms     984/475  4.1       23.0    101.3       2.13
//	2        dlock redis://    682      3.3 ms    1.33 ms     683/682  21.0      92.1    180.1       2.00
//	8        bare SET NX spin  734    240.4 ms    5.34 ms     256/100  4.9       27.1    133.2       2.91
//	8        dlock redis://    648     15.0 ms    1.10 ms     163/161  22.0      118.1   201.9       2.02
//	32       bare SET NX spin  692    487.6 ms    4.10 ms     83/15    8.2       26.6    256.7       6.22
//	32       dlock redis://    634     61.4 ms    1.43 ms     41/39    22.2      126.2   216.4       2.07
//
// cmds/acq counts every command INFO commandstats reports, the scripts'
// inner commands included, and µs/acq sums their usec (a script's usec
// already includes its inner commands', so scripts are counted about a
// third too high, and a preempted server counts its wait); CPU µs/acq is
// the server main thread's CPU time (INFO cpu), networking and pub/sub
// included: 1.5x the bare lock's with 8 workers (1.4x to 1.7x in runs before). Waiters queue on the
// server, so commands per acquisition stay flat from 2 to 32 waiting Lockers (before the queue:
// 15.7, 40.6 and 108 in BENCHMARKS.md, each release waking every Locker),
// and so do round trips (two: the refused attempt that queues, and the
// release that hands the lock on; before: 3.3, 9.4 and 26). Each waiting
// process gets its turn (fairness 1.0). The handoff and wait tails are
// the machine's: a FIFO handoff waits for one given process to be
// scheduled, where a spin lock takes whichever runs; with 8 waiters the
// wait is about eight cycles, and on this machine a cycle took 1.5 ms
// (1.3 to 1.7 ms in earlier runs), not 1. TestQueueCommandsPerAcquisitionFlat
// checks the flat commands per acquisition on a server of its own.
//
// There is no barging mode. sync.Mutex's trade (a Lock arriving as the
// key is freed takes it ahead of the line, until the first waiter has
// waited past a bound) was built and measured on this machine, and did
// not raise throughput. The line's handoff already costs one round trip:
// the release grants the key, and the waiter takes it without a request
// of its own. A barging release frees the key instead, and the releaser's
// next Lock takes it back in a second round trip, while the first waiter,
// woken, makes an attempt that is refused. At 8 processes (make
// bench-peers' contended scenario, 1 ms hold, medians of 2):
//
//	barging window, first waiter woken     acq/s   line acq/s   spin lock acq/s
//	2 ms, at every release                 608     619          719
//	2 ms, once per turn                    594     668          721
//	5 ms, once per turn                    655     682          728
//
// In the last two rows the first waiter times its next attempt for the
// end of its window. The spin lock's lead comes from its cheaper
// commands (server CPU 135-142 µs per acquisition in those runs, against
// 182-193 µs for the line), not from the order it hands the key in.
//
// # Minimum hold
//
// A minimum hold (dlock.WithMinHold, driver.Lapser) released early sets
// the lock key's expiry, owner-checked as a renewal is, to what remains of
// it, rounded up to the millisecond: the server frees the key then,
// whatever becomes of the process. The same script serves a standalone
// server, Sentinel and Cluster; with wait_replicas it waits for the
// replicas as a renewal does. An expiry publishes nothing: a queued waiter
// tries again at the remaining lease its refused attempt was told, or at
// the latest at its entry's refresh (a third of its lease).
package redis
