// Package zookeeper is dlock's ZooKeeper backend (scheme zk://): the
// classic consensus lock, Curator's InterProcessMutex recipe, on
// github.com/go-zookeeper/zk.
//
// # URL
//
//	zk://[user:password@]host:port[,host:port...][/chroot][?params]
//
// The hosts are the ensemble (port 2181 when omitted). The path is the
// znode under which locks live (default /dlock); go-zookeeper has no
// chroot of its own, so it is a prefix the driver adds. Parameters:
//
//	session_timeout=10s  the session timeout to ask for; the server clamps
//	                     it to its bounds (2 to 20 ticks by default), and
//	                     the driver uses the value the server granted
//	connect_timeout=10s  how long Open waits for a first session
//	acl=open             ACL of created nodes: open (world:anyone, all
//	                     permissions) or creator (only the authenticated
//	                     user; needs user:password, sent as digest auth)
//
// Open also takes dlock's own ttl= and autorenew=; any other parameter is
// an error matching dlock.ErrInvalidURL. With credentials in the URL the
// connection authenticates with the digest scheme whatever the ACL.
//
// New makes a Locker over a *zk.Conn the caller already has; see Config.
//
// # The recipe
//
// Each key maps to one znode under the prefix: bytes other than ASCII
// letters, digits, '-' and '_' are escaped as %XX, so any key (with '/',
// spaces, ".", "..", NUL, any UTF-8, up to 4 KiB) has its own, valid name
// (see KeyPath). That znode is created as a container, which the server
// removes some time after its last lock node goes: it looks for empty
// containers every znode.container.checkIntervalMs (a minute by default)
// and deletes at most znode.container.maxPerMinute of them a minute
// (10,000 by default). A program that locks many distinct keys leaves
// the ensemble that work after it unlocks them: after 100,000 keys, ten
// minutes of deletes, which took about 0.07 of a core on the development
// machine (the reason benchpeers runs ZooKeeper's many-holds last).
//
// To lock, the driver creates a protected ephemeral sequential node under
// it, "_c_<guid>-lock-<sequence>", the GUID being the hold's owner ID (a
// fresh one whenever a node must be made again), lists the children, and
// holds the lock if its node is the first (its lease counted from the last
// request the leader ordered, see below); otherwise it watches only the node just
// before its own and lists again when that one goes. Nodes are ordered by
// creation: the sequence suffix is a signed 32-bit counter that wraps to
// -2147483648 after 2^31 changes under one key, so the numbers are read
// on the 2^32 circle and the queue starts after the widest gap between
// them, which is exact while a key's live nodes span fewer than 2^31
// changes (TestQueueAcrossSequenceWrap). Waiters
// are served in the order they queued, and a release wakes one waiter, not
// all of them. A create whose reply is lost (the connection broke) may
// have been applied: the node is looked for by its GUID before another is
// made, and a duplicate found later is deleted. TryLock creates the node
// and deletes it again if it is not the lowest. When a Lock's context
// ends, or any step fails, the node is deleted before the call returns,
// or, when the server cannot be reached in time, by a background cleaner
// as soon as it can be. A blocking Lock rides out a lost connection (a
// leader election, a server restart) for up to one session timeout before
// it returns dlock.ErrUnavailable; TryLock does not. The names are those of
// go-zookeeper's zk.Lock and Curator's protected mode, so such a lock on
// KeyPath(prefix, key) shares the queue with dlock.
//
// A lock node's data is "dlock ttl=MS", a newline and the holder's
// description (dlock.WithOwner). Inspect syncs, lists the key's queue and
// reads its lowest node: the token is that node's czxid, the description
// its data, Waiters the number of nodes behind it. ZooKeeper keeps no lease
// end for a node (the server removes it with its session, up to one
// session timeout after it last heard from the holder, and the holder's
// driver deletes it when its lease runs out unrenewed), so Remaining is the
// holder's TTL, which is its session timeout: the longest the node can
// outlive its holder (0 for a node another recipe made). Break deletes the
// lowest node and leaves the others queued: the next is granted, with a
// higher czxid; the broken holder's watch on its node closes its Done with
// ErrLockLost (its next renewal would find the node gone too).
//
// The fencing token is the czxid of the holder's node: the zxid of the
// transaction that created it. Holders are served in creation order and
// zxids only grow (their high half is the leader's epoch, which grows at
// every election), so tokens strictly increase, also across leader
// changes and when the key's znode is removed and created again, unlike
// the sequence suffix, which restarts then.
//
// # Records
//
// A key's record (driver.Recorder, which dlock.Semaphore uses for its
// number of permits) is the data of a persistent znode
// <prefix>/.records/<escaped key>, created with the Locker's ACL. Keys are
// escaped as for locks, and '.' always is, so no key's znode is .records
// and no lock node is made under it; sessions, Break, Inspect and the
// server's removal of empty containers leave it alone. Record is one
// create when the key has no record znode yet (two more the first time,
// for .records and the prefix); when it exists, a sync and a read, plus a
// compare-and-set on its version when it was cleared. ClearRecord is a
// sync, a read and a compare-and-set of the data to empty on the version
// read: the znode is kept, so that its version only grows and a record
// made again after a clear can never be taken for the one read. A cleared
// record therefore leaves an empty znode, a few bytes per key ever
// recorded. A record is as durable as the ensemble's data: written to a
// quorum's transaction logs before the reply, it is lost only when they
// are.
//
// # Leases, sessions and the loss signal
//
// A ZooKeeper lock lasts as long as its node, and the node as long as the
// session that made it. The driver maps dlock's lease onto that as follows.
//
//   - The TTL is the session timeout the server granted, neither shorter
//     nor longer (driver.Limits: MinTTL = MaxTTL = the session timeout). A
//     holder that dies without unlocking keeps the lock until its session
//     expires, up to one session timeout after the server last heard from
//     it, so a shorter TTL would promise the other clients something the
//     server does not do; and the server may hand the lock on one session
//     timeout after it last heard from a holder that is cut off, so with a
//     longer TTL Lease().Expires would lie past that moment. A Locker
//     opened without ttl= (or New without WithTTL) uses the granted session
//     timeout, also when the server granted less than session_timeout asked
//     for; another TTL is refused with an error matching
//     dlock.ErrInvalidOption, at Open, New or NewMutex
//     (TestTTLIsTheSessionTimeout).
//   - The session is kept alive by the client in the background, so on its
//     own a node would outlive a holder that stops renewing; the driver
//     therefore keeps the lease itself: Renew checks that the node still
//     exists and belongs to this session (a sync, then an Exists) and moves
//     the lease's end to a full TTL from then, and a lease that runs out
//     unrenewed has its node deleted by the driver, as a server would
//     expire a lease. The watchdog renews the holds that are due together
//     (driver.BatchRenewer) with one sync and one read for all of them, on
//     a Locker opened from a URL: each hold's node watch vouches for its
//     node between rounds, since ZooKeeper sends the watch's event before
//     the answer to any later request on the connection. A hold whose
//     watch may not be on the server (after a reconnection, or an event
//     of its node) is read on its own, which sets its watch again (see
//     RenewBatch).
//   - Only answers the leader ordered confirm a session or a renewal. A
//     follower answers reads and pings from its own copy of the data, and
//     one cut off from the leader goes on doing so for up to syncLimit x
//     tickTime while the leader expires the session, deletes its nodes and
//     grants the lock to another client. The session heartbeat and Renew
//     therefore each send a sync first: a follower answers it only after
//     applying everything the leader committed before it (an expired
//     session's closing included), and a cut-off one does not answer it at
//     all (TestFollowerCutOffLosesBeforeNextGrant, and fault scenario 11).
//     A grant's listing needs none: sequence numbers only grow, and a
//     lagging copy shows a state the leader went through, so a listing
//     that shows our node first, from any server, means the leader has it
//     first too, or has deleted it, which only the end of our session does
//     (or an operator, which the node's watch reports). The lease is
//     counted from the last request the leader ordered, never from the
//     listing, so it ends before the session can have: a waiter that is
//     woken lists at once, one round trip per handoff.
//   - Hold.Since, from which the lease runs, is the last instant the
//     leader is known to have heard of the session: when the create of
//     the node was sent, or a later heartbeat or confirmation, not when
//     the listing was. When that is older than a quarter of the session
//     timeout (a long wait, or a create answered late, during a leader
//     election), the grant first confirms the session again with a sync
//     and a read, and the lease runs from that sync: otherwise the rule below would give the hold up
//     as soon as Lock returned (TestLateCreateGrantIsConfirmedAgain). A
//     grant whose session nothing confirmed within that rule's limit, not
//     even the heartbeats while the sync ran, fails with ErrUnavailable.
//   - Done is closed (Hold.Lost) when the node is deleted (an operator, or
//     the lease running out), when the connection comes back with a new
//     session (the old one expired: its nodes are gone), and already when
//     the session may have expired: when no sync and read have been
//     answered for half a session timeout (minus drift) since the last one
//     that was. Half, not nearly all of it: a follower passes a session's
//     activity on to the leader only with its answer to the leader's next
//     ping, up to tickTime/2 later, so what the leader heard last may be
//     the request before the confirmed one. While it holds locks the driver
//     sends a sync and a read every tenth of the session timeout (not
//     waiting for a slow one), which keeps that gap small; the margin holds
//     while tickTime is at most a third of the session timeout (ZooKeeper's
//     defaults: 2 s and 10 s; these servers: 500 ms). This is Curator's
//     SUSPENDED and LOST: a holder cut off from the servers cannot know
//     whether it still holds the lock, and must stop acting before the
//     server can have given the lock to someone else.
//   - ZooKeeper answers a session's requests in order, so that sync and
//     read wait behind every request sent before them. At most 64
//     acquisitions and releases of a Locker have requests in flight at
//     once (maxInFlight; a waiter gives its turn up while it waits for the
//     node before its own); the others wait for a turn. Without the bound,
//     5,000 Locks at once on a 4 s session kept the heartbeat waiting
//     longer than half the session timeout: the Locker's holds were given
//     up, and some of the Locks failed (TestBurstKeepsHolds).
//   - The deletion of a hold's node is seen through the watch the grant's
//     Exists set. go-zookeeper delivers each watch on a channel of its own;
//     a Locker opened from a URL reads the events from the connection's
//     event callback instead, so a hold costs no goroutine (one timer for
//     its lease, which runs only when it fires). Over a caller's Conn (New)
//     there is no callback to use, and each hold waits on its channel in a
//     goroutine (TestHoldGoroutines).
//   - A node is never created again behind the caller's back. go-zookeeper
//     reconnects with a new session after an expiry; a hold of the old
//     session stays lost, and Unlock reports dlock.ErrLockLost.
//   - go-zookeeper v1.0.4 has a data race on a reconnection that resumes
//     the session while it has watches: it reads the last zxid it saw to
//     set them again while its receive loop may write it for the answers
//     to requests queued during the disconnection. It is harmless (a 64-bit
//     word used only for that request) but fails tests run with -race. A
//     Locker opened from a URL holds the answers on such a connection back
//     until the watches went out (replygate.go,
//     TestResumedSessionWithWatchesIsRaceFree), at most 100 ms when there
//     is no watch to set; over a caller's Conn the race stays the
//     library's.
//
// What this promises, honestly: while the process runs, Done is closed
// before the leader can expire the session, also for a client whose only
// server is a follower cut off from the leader, so two holders never
// overlap unless a process is paused (GC, SIGSTOP) or its clock jumps for
// longer than the margin. Lease().Expires is one session timeout after the
// request that last confirmed the hold; for a client of a follower the
// leader may have heard of the session up to tickTime/2 plus one heartbeat
// (a tenth of the session timeout) before that, so a process paused past
// the loss signal can find the lock handed on that much before its
// Lease().Expires. Fencing tokens protect the resource in every case.
//
// # Minimum hold
//
// A lock node dies with its session, so a minimum hold (dlock.WithMinHold)
// is kept by a marker that outlives it: a persistent child of the key's
// znode, "_minhold-lock-999999999", whose data is the minimum in
// milliseconds ("dlock minhold ms=MS"). The key is held until the
// marker's mtime plus that minimum, both times from the leader's clock.
//
//   - A hold granted with Request.MinHold writes the marker as it is
//     granted: one multi [check our node, set (or create) the marker]
//     after the listing that showed our node first, so its mtime is no
//     earlier than the grant, and it is written only while our node, and
//     so our session, lives. If the holder's session ends (the process
//     died, or it was cut off), the marker still holds the key until the
//     minimum has passed from the grant; a plain Release keeps it too.
//     One more round trip for such a hold; none for the others.
//   - ReleaseAfter (driver.Lapser) is one multi [check our node, set the
//     marker to the time left, rounded up to the millisecond, delete our
//     node]: if our node is gone (broken, expired) nothing is written and
//     the error wraps ErrNotHeld. After it the driver keeps nothing: Close
//     ends the session, which no longer has the node.
//   - The next in the queue is woken by the deletion as usual. The listing
//     that shows its node first also shows the marker, if any (without a
//     marker, a grant costs nothing more); it then reads the marker and
//     works out, from its own node's ctime (leader clock) and when it saw
//     its create answered (its own clock), a local instant no earlier than
//     the marker's end: seen + (mtime + minimum + 1ms - ctime). A waiter
//     keeps its place at the head of the queue and waits for that instant
//     on a timer (no polling), then lists again; TryLock deletes its node
//     and reports the key held with that time left. Whoever finds the
//     marker run out deletes it (guarded by its version); a holder with a
//     minimum of its own writes it again instead.
//   - Caveats: the two leader-clock times may come from two leaders (a
//     leader change between the marker's write and the waiter's create),
//     so a step between their clocks lengthens or shortens the minimum by
//     that much; the waiter's estimate adds the latency of its create.
//     A marker written by a multi whose answer was lost, after which the
//     grant or release failed, still holds the key for its minimum.
//     Inspect reports a key held by a marker alone as held, by the token
//     the marker names, with a Remaining read against the client's own
//     clock (an estimate, off by the clock skew between client and
//     leader). Break deletes the marker along with the lowest node. go-zookeeper's zk.Lock and
//     Curator, which read the digits after "lock-", sort the marker after
//     every lock node while the key's sequence numbers stay below
//     999999999 (zk.Lock would then wait for the marker to go), and do
//     not honour it.
//
// # Failover, rollback, clocks and partitions
//
//   - Leader failover: exclusion and token order hold. Sessions survive
//     the election; czxids carry the new leader's epoch in their high
//     half, so tokens keep growing (TestLeaderKill; fault scenarios 8,
//     killed, paused and isolated from its peers, on zookeeper3).
//   - Snapshot rollback: a ZooKeeper server acknowledges a write only
//     after logging it to disk (forceSync, on by default and here), and
//     the ensemble commits it only once a quorum has, so a server killed
//     and restarted on its data, or a minority that comes back behind,
//     does not take zxids, and so tokens, back: it catches up from the
//     leader before it serves (fault scenario 8, leader killed and
//     restarted). Restoring a whole ensemble, or a quorum of it, from an
//     old snapshot would bring tokens back; no test covers that.
//   - Server clock step: tokens do not read any clock. A session's expiry
//     is timed on the leader's clock, ZooKeeper measuring it with a
//     monotonic one; the client's loss signal uses its own monotonic
//     clock. No test steps a clock.
//   - A client on a partitioned follower: Done closes before the leader's
//     side can grant the lock on; with fencing nothing is lost
//     (TestFollowerCutOffLosesBeforeNextGrant; fault scenario 11 on
//     zookeeper3).
//
// # Benchmarks
//
// dlock against go-zookeeper's own zk.Lock, in one run against the same
// standalone server (the zookeeper topology: ZooKeeper 3.8.0, 500 ms tick,
// fsync on), on the shared two-core development machine (load average
// about 2), so single runs scatter widely; medians of five:
//
//	set -a; . .dlock/endpoints.env; set +a
//	go test -run '^$' -bench BenchmarkVsZkLock -benchtime 3s -count 5 ./backend/zookeeper/
//
//	                                  dlock          zk.Lock
//	Uncontended Lock+Unlock, in turn  3.69 ms        3.45 ms     (ratio 1.24, runs 1.01-1.50)
//	Contended (8 goroutines, 2 conns) 165 acq/s      228 acq/s
//	  handoff p50 / p99               2.2 / 28 ms    1.7 / 19 ms
//
// zk.Lock makes three round trips for an uncontended Lock+Unlock (create,
// list, delete), two of them writes the server syncs to disk; so does
// dlock: the listing right after the create needs no sync (see above), and
// dlock's Exists on its own node, for the token (the czxid: go-zookeeper
// has no create that returns the node's Stat) and the deletion watch,
// goes out alongside the listing. The figures above were measured with a
// sync before that listing too, a fourth round trip; without it, the
// paired ratio went from 1.36-1.49 to 1.16-1.21 in four runs of each,
// interleaved (go test -bench 'BenchmarkVsZkLock/Uncontended/paired'
// -benchtime 2s -count 2, on the old and the new code in turn). What is
// left is the fourth request and the client's own work, on the two cores
// the server shares. The fourth request alone costs 150 to 230 µs of a
// cycle of 1.5 to 2.2 ms (go test -run '^$' -bench TokenRead
// ./backend/zookeeper/, which adds it to a raw create, list and delete;
// six runs). A contended handoff is one listing after the watch event
// (it paid a sync before it too, until the lease was counted from the
// create: go test -run '^$' -bench 'VsZkLock/Contended' -benchtime 3s
// -count 2 ./backend/zookeeper/ then gave dlock 0.5-0.67x zk.Lock, and
// 0.85-1.3x after, on a loaded machine). "In turn" is
// BenchmarkVsZkLock/Uncontended/paired, which alternates the two within
// each iteration so that the machine's load weighs on both alike; the
// separate Uncontended runs scatter from 1.6 to 3.9 ms for both. The
// portable suite's benchmarks (BenchmarkConformance) cover the ensemble
// too.
//
// A Locker is one connection and one session. Lock on a key that the
// same Locker is already waiting for waits in the portable layer, so a
// process queues at most one node per key and Locker.
package zookeeper
