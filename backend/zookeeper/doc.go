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
// removes some time after its last lock node goes.
//
// To lock, the driver creates a protected ephemeral sequential node under
// it, "_c_<guid>-lock-<sequence>", the GUID being the hold's owner ID (a
// fresh one whenever a node must be made again), lists the children, and
// holds the lock if its node is the lowest; otherwise it watches only the
// node just before its own and lists again when that one goes. Waiters
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
// The fencing token is the czxid of the holder's node: the zxid of the
// transaction that created it. Holders are served in creation order and
// zxids only grow (their high half is the leader's epoch, which grows at
// every election), so tokens strictly increase, also across leader
// changes and when the key's znode is removed and created again, unlike
// the sequence suffix, which restarts then.
//
// # Leases, sessions and the loss signal
//
// A ZooKeeper lock lasts as long as its node, and the node as long as the
// session that made it. The driver maps dlock's lease onto that as follows.
//
//   - The minimum TTL (driver.Limits.MinTTL) is the session timeout the
//     server granted. A holder that dies without unlocking keeps the lock
//     until its session expires, up to one session timeout after the
//     server last heard from it; a shorter TTL would promise the other
//     clients something the server does not do.
//   - The granted TTL is the TTL asked for. The session is kept alive by
//     the client in the background, so on its own a node would outlive a
//     holder that stops renewing; the driver therefore keeps the lease
//     itself: Renew checks that the node still exists and belongs to this
//     session (one Exists) and moves the lease's end to a full TTL from
//     then, and a lease that runs out unrenewed has its node deleted by the
//     driver, as a server would expire a lease.
//   - Hold.Since, from which the lease runs, is when the listing that showed
//     the node to be the lowest was sent, not when Lock began waiting.
//   - Done is closed (Hold.Lost) when the node is deleted (an operator, or
//     the lease running out), when the connection comes back with a new
//     session (the old one expired: its nodes are gone), and already when
//     the session may have expired: when no request has been answered for
//     0.9 session timeouts (minus drift) since the last one the driver knows
//     was heard. While it holds locks the driver sends one cheap request
//     every third of the session timeout to know this. This is Curator's
//     SUSPENDED and LOST: a holder cut off from the servers cannot know
//     whether it still holds the lock, and must stop acting before the
//     server can have given the lock to someone else.
//   - A node is never created again behind the caller's back. go-zookeeper
//     reconnects with a new session after an expiry; a hold of the old
//     session stays lost, and Unlock reports dlock.ErrLockLost.
//
// What this promises, honestly: while the process runs, Done is closed
// before the server can expire the session, so two holders never overlap
// unless a process is paused (GC, SIGSTOP) or its clock jumps for longer
// than the margin. A TTL longer than the session timeout rests on that
// loss signal: a process paused for longer than the session timeout can
// lose its node before Lease().Expires while Done is not yet closed when
// it resumes. With TTL equal to the session timeout, Lease().Expires alone
// is safe, since a session answered at time t lives until at least t plus
// the session timeout on the server. Fencing tokens protect the resource
// in every case.
//
// # Benchmarks
//
// dlock against go-zookeeper's own zk.Lock, in one run against the same
// standalone server (the zookeeper topology: ZooKeeper 3.8.0, 500 ms tick,
// fsync on), on the shared two-core development machine under a load
// average of 8 to 10 from other builds, so single runs scatter widely;
// medians of five:
//
//	set -a; . .dlock/endpoints.env; set +a
//	go test -run '^$' -bench BenchmarkVsZkLock -benchtime 3s -count 5 ./backend/zookeeper/
//
//	                                  dlock          zk.Lock
//	Uncontended Lock+Unlock, in turn  2.45 ms        2.26 ms     (ratio 1.08, runs 1.06-1.26)
//	Contended (8 goroutines, 2 conns) 263 acq/s      243 acq/s
//	  handoff p50 / p99               1.20 / 11 ms   1.18 / 23 ms
//
// Both make the same three round trips for an uncontended Lock+Unlock
// (create, list, delete), two of them writes the server syncs to disk;
// dlock's Exists on its own node, for the token and the deletion watch,
// goes out alongside the listing and costs about 0.1 ms of server time.
// "In turn" is BenchmarkVsZkLock/Uncontended/paired, which alternates the
// two within each iteration so that the machine's load weighs on both
// alike; the separate Uncontended runs scatter from 1.4 to 4 ms for both.
// The portable suite's benchmarks (BenchmarkConformance) cover the
// ensemble too.
//
// A Locker is one connection and one session. Lock on a key that the
// same Locker is already waiting for waits in the portable layer, so a
// process queues at most one node per key and Locker.
package zookeeper
