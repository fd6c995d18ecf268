// Package etcd is dlock's backend for etcd v3 (scheme etcd://): the one to
// move to when safety matters, since every lock operation goes through
// etcd's Raft log and a lock survives the loss of a minority of members.
//
// # URL
//
//	etcd://[user:password@]host:port[,host:port...][/prefix][?dial_timeout=5s]
//
// Give every member of the cluster: the client balances over them and fails
// over when one dies. A host without a port uses 2379. The path is the key
// prefix under which locks live ("dlock/" when empty; a "/" is appended; a
// second slash, etcd://h:2379//locks, makes a prefix that starts with "/").
// Parameters:
//
//	dial_timeout=5s  how long Open waits for the cluster to answer a first
//	                 read; an unreachable cluster is an ErrUnavailable error
//	ttl=30s          (dlock) default lease, whole seconds from 2s
//	autorenew=true   (dlock) renewal watchdog on or off
//
// Any other parameter is an ErrInvalidURL error. For TLS or any other client
// setting, build a *clientv3.Client yourself and call New.
//
// # What it promises
//
// Exclusion within the validity window, fencing tokens and a loss signal,
// as every dlock backend (see package dlock), with these specifics:
//
//   - Leases are whole seconds: a TTL is rounded up and the granted TTL is
//     what Lease().TTL reports. etcd 3.4 silently raises leases below 2s, so
//     a shorter TTL is refused when the Mutex is made (MinTTL).
//   - Waiters queue on the server in the order they arrive (create revision
//     of their entry) and each watches only its predecessor: no herd, no
//     polling, and fair across processes.
//   - The fencing token is the create revision of the holder's own entry.
//     Holders are served in create-revision order, so tokens strictly
//     increase, across leader elections too (revisions are part of the
//     replicated state).
//   - Release deletes the entry only if its create revision is still the
//     holder's, so a late or retried release never frees a later hold.
//   - Done closes at once when the lease is revoked or the entry deleted
//     (a watch on the holder's own entry), and before the lease can expire
//     when renewals fail (dlock's watchdog).
//   - A waiter whose lease ends while it is queued (the client could not
//     reach the cluster for a whole TTL, or the lease was revoked) stops
//     with ErrLockLost instead of waiting for ever (etcd issue 19597).
//   - Lost quorum: requests fail with ErrUnavailable once their context
//     ends; a holder that cannot renew sees Done close before its lease
//     could have expired. After a leader election etcd extends every lease,
//     so a lease never ends earlier than the client's validity window says.
//
// # Layout in etcd
//
// A lock on key K is the queue of keys prefix + escape(K) + "/" + owner,
// where escape leaves letters, digits and "-._~" alone and writes every
// other byte as %XX (so "a/b" and "a%2Fb" are different locks, and no
// queue is a prefix of another). Each entry is attached to its own lease.
// The entry with the smallest create revision holds the lock.
package etcd
