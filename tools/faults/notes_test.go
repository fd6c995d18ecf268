package faults

// reportNotes follows the table in FAULTS.md.
const reportNotes = `
## Reading the table

- Workers are separate processes looping acquire → read → sleep 0-200ms →
  write +1 → release against a counter that is either unfenced or fenced with
  package fence. A check that must pass and fails makes the cell FAIL.
- **Canaries** (the unfenced rows of 2, 6 and 7c) pause or strand a holder
  past its lease and must show the violation (a stale token accepted, an
  update lost); if they showed nothing the harness would be blind, and the
  cell would FAIL.
- **6, fenced**: restarting a Redis without persistence forgets the lock, so
  two holders really do overlap inside their validity windows (exclusion
  violated, as expected); fencing keeps the data right anyway: the stale
  holder's write is rejected and nothing is lost, because the fencing counter
  is seeded from the server's TIME and so never goes back.
- **6c** kills PostgreSQL (SIGKILL, a crash) while a lock is held and starts
  it again: a committed lease comes back with crash recovery and its expiry
  ran on the server's clock meanwhile, so every check passes, fenced or not;
  the holder's renewals fail while the server is down and are retried.
- **7c, fenced**: a Redlock master restarted empty while it carried a hold
  hands the lock to a second client; the two-phase token (and the emptied
  master's TIME-seeded counter) keeps tokens monotone, so the stale write is
  rejected. This assumes instances keep their counters or come back with a
  clock that moved forward; restarting a master only after the longest TTL
  (the Redlock page's delayed restart) avoids the overlap itself.
- **6b, 7d** take a snapshot (SAVE), let at least 3 (Redis) or 15
  (Redlock) more acquisitions happen, then kill the server (every Redlock
  master) while a victim holds the lock, and restart it from the snapshot:
  the locks taken since are forgotten (exclusion may be lost, as in 6: the
  fenced cell does not judge it, the unfenced one is the canary) and the
  fencing counters come back behind tokens already issued. Tokens must still
  increase, which needs the acquire scripts' floor at the server clock
  (max(counter + 1, TIME)); before it, the fenced cells failed
  monotone-tokens (tokens repeated). On Redlock the cell rolls back every
  master: with only some rolled back, quorum intersection already keeps the
  tokens increasing.
- **17** (Redis and Redlock, whose releases hand the lock to the first
  waiter in line) pauses every waiter in line while the lock is held, so
  the release hands the lock to a paused process. The lock comes back to
  the others when that grant's lease runs out, and a resumed waiter, whose
  grant is stale by then, attempts again instead of holding with it. A
  grant names the attempt whose refresh its elapsed time counts from:
  before that, a waiter that attempted once more on resuming, and then
  read the late grant, counted it from that new attempt, and held the
  lock beside the worker that had taken it meanwhile (the cell failed in
  4 of 6 runs on Redis).
- **14, 15** are 2 and 4 with the workers candidates of a dlock.Election
  instead of holders of a Mutex (Campaign, the term as the token,
  Unlock): a leader paused past its lease is replaced, and its write with
  its old term is refused by the fence (seen, unfenced: the canary); a
  leader killed is replaced within the lease plus the liveness bound, with
  terms increasing.
- **12** runs a private redis-sentinel topology (a primary, one replica,
  three Sentinels; a primary is down after 1 s). The primary refuses its
  replica PSYNC (an ACL rule) and drops the replication link, so the
  replica misses what follows; the victim then acquires and the primary is
  killed; the Sentinels promote the replica. Unfenced: a canary (the
  victim's stale write lands). Fenced: tokens must increase and nothing may
  be lost; exclusion is not required, since the promoted replica does not
  have the victim's lock. With wait_replicas=1 no acquire is granted while
  the replica is cut off (WAIT times out, the acquire is undone), renewals
  fail so the holder's Done closes in time, and every check must pass,
  exclusion included; locking resumes once the old primary is back as a
  replica. That holds for one replica and wait_replicas=1: with more
  replicas than wait_replicas a promoted replica may not be one that
  acknowledged.
- **13** runs a private redis-cluster (3 masters, 3 replicas, node timeout
  5 s): the replica of the master serving the lock's slot is cut off as in
  12, the victim acquires, the master is killed and the Cluster promotes
  the replica. As 12 without WAIT; liveness is counted from the promotion
  and bounded at 3 s beyond the lease, which the clients meet because the
  redis backend reloads the slot map as soon as a node stops answering.
- **5b** delays every byte on every worker's links to the servers by 100ms
  (+-20ms) each way, with a toxiproxy latency toxic, for the whole run: no
  hold may be taken for lost and nothing rejected. Redlock runs it with
  timeout=500ms and a 5s lease: its per-instance timeout (100ms by default,
  at most a tenth of the lease) must exceed the round trip, or no instance
  answers in time and no lock is granted.
- **8, paused (SIGSTOP)** stops the leader process: it answers neither its
  peers nor its clients. On etcd3 this cell used to fail (two holders at
  once, tokens out of order) in two ways. Once resumed, the old leader
  answered keepalives before it learned it had been replaced, renewing
  leases only in its own memory (etcd issue 15247, fixed in etcd 3.4.25 and
  3.5.8; these servers run 3.4.23): the etcd backend counts a keepalive
  only when a consensus response confirms its raft term. And it had the
  leases it found expired in its memory revoked through the new leader,
  also those the new leader had kept alive meanwhile (etcd 3.6.16 does it
  too): the etcd backend extends a lease only with keepalives of the term
  it was granted in, and moves the entries of older leases onto leases of
  the new term.
- **8, isolated from its peers** runs a private copy of the cluster whose
  members reach each other by name over one route per ordered pair: each
  member runs with a hosts file of its own (bind-mounted in a mount
  namespace of its own; the network is the host's loopback), in which every
  other member's name leads to 127.77.<from>.<to>, where a toxiproxy proxy
  listens. All routes to and from the leader are cut while clients still
  reach it: the other two must elect a leader and locking must go on during
  the partition; the cut-off member rejoins after the heal. On etcd the
  cut-off member refuses calls at once for want of a leader (etcd's
  require-leader flag). A ZooKeeper server that gets an election connection
  from a lower ID connects back to the address that peer announces, around
  any proxy, so election routes from a lower ID to a higher one open only
  after the heal (for the cut-off server to rejoin). A
  ZooKeeper election after the cut takes 5-15 s: followers notice the
  leader's silence after syncLimit (5 s), and one that tries to follow the
  cut-off leader again waits initLimit (10 s) for it.
- **11** runs a private peer-routed zookeeper3 too: worker 0 reaches only
  one follower, the others only the leader and the other follower. While
  worker 0 holds, every route to and from its follower is cut. The follower
  goes on answering its clients from its own copy for syncLimit x tickTime
  (5 s) while the leader expires worker 0's session (2 s) and grants the
  lock on, so besides every usual check the cell requires worker 0's Done
  to close before the next holder's Lock returns (done-before-next-grant).
  The ZooKeeper backend confirms sessions and renewals only with a sync and
  a read after it, which a cut-off follower does not answer; with local
  reads the cell failed, Done closing about 4 s after the next Lock
  returned.
- **16** runs four workers on a semaphore of two permits (dlock.Semaphore):
  each worker holds one permit and increments that permit's own counter,
  fenced on the permit's key. Worker 0 stops itself after a read, past its
  lease; its permit goes to a waiter, whose write comes first; worker 0 then
  resumes and writes. permits: never more than two holders inside their
  validity windows; the permit-* checks are the usual ones on each permit's
  own history. Fenced, the stale write is rejected; unfenced (the canary) it
  is accepted and seen. As in 2, loss-before-expiry is not judged: a paused
  holder learns of its loss when it resumes.
- **18** holds 1,000 keys on one Locker in one worker process (TTLs of
  4 to 6 s in steps of 100 ms; PostgreSQL 8 to 10 s, Consul 10 to 12 s,
  ZooKeeper one session timeout of 4 s for all; half with Lock and Done,
  half inside dlock.Do) and then cuts that Locker off from its store:
  its toxiproxy links hold every byte, or on file:// every state file's
  flock is held from outside. Every renewal call then stalls until its
  deadline; done-before-lease-end requires each hold's Done (or Do's
  context) to close before its validity deadline plus
  driver.DriftAllowance, when the store may end the lease at the soonest.
  Before the loss lane (sched.go), lost holds were ended by jobs queued
  behind those stalled calls: on file and Redis 170 to 330 of the thousand
  closed too late, by up to 0.75 s. A second worker with a Locker of its own
  then takes over 16 of the keys as their leases end and writes their
  counters, and the cut-off holder writes them with its old tokens:
  fenced, those writes are rejected and the usual checks hold on every
  key's own history (key-*); unfenced (the canary) they land and are
  seen. The 18 cells run one at a time, whatever their lanes. PostgreSQL
  runs it with pool_max_conns=32 and longer leases: with pgx's default
  pool (4 connections here) and 4 to 6 s, a thousand holds were not
  renewed in time under the race detector on a loaded machine, and were
  lost before the cut. Redis Cluster and Sentinel are not in it: their clients learn
  the nodes' own addresses from the servers, around any proxy.
- **19** and **20** run workers on a read-write lock of two readers
  (dlock.RWMutex): writers read and increment the counter, readers only
  read it. Fenced, the resource accepts a write iff its token is at least
  the highest writer and reader tokens it accepted, and a read iff at
  least the highest writer token (docs/rwmutex.md). Writers' holds get
  the usual checks on their own history (writers-*); permits: never more
  than two readers inside their validity windows; readers-writers: no
  reader's window overlaps a writer's. In 19 writer 0 stops itself after
  a read, past its lease; the other writer writes and a reader reads after
  it; worker 0 then resumes and writes: rejected when fenced, accepted and
  seen unfenced (the canary). In 20 a reader is killed while it holds; the
  writer gets in once the reader's lease has run out.
- **21** moves a fleet from one backend to another by rolling restarts
  (docs/moving.md): four workers restarted one by one from the old store
  to C1 (both stores), the commit, then to C2 (the new store, tokens
  lifted), one killed and one paused past its lease on the way; every
  check passes and every restarted worker writes. **21c**, its canary,
  commits at once and restarts half the workers from the old store
  straight to C2: the exclusion check sees the overlap, and the fence
  refuses the old store's writes.
- **Liveness** is measured from the heal (kill, restart, resume) to the next
  acquisition, bounded by the backend's TTL, its expiry grace (Consul: 2×TTL)
  and a per-backend allowance for elections.
- CI (.ci/run) runs the whole matrix after make test. Within make test the
  harness also runs on the file backend, and the peer partition of etcd3
  and zookeeper3 on its own (TestPeerRoutes). The cells run in four lanes
  side by side, one cell at a time within a lane: Consul's cells (which
  never touch the agent), the failovers of 12 and 13 (on private
  topologies of their own), 18 on file, etcd and zookeeper (whose
  servers no cell stops), and every other cell; no cell disturbs a
  server that another lane uses.
`
