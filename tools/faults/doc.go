// Package faults is dlock's fault suite: it kills, pauses and partitions
// real servers and real client processes, and checks every history with
// checkers that can see a violation.
//
// A run starts client workers as separate OS processes (the test binary
// re-executed), so that SIGSTOP pauses a client the way a GC pause or swap
// storm would. Each worker loops: acquire, read a counter from the resource,
// sleep 0-200ms, write counter+1, release. The resource lives in the test
// process behind HTTP on loopback; it is either unfenced (it accepts every
// operation) or fenced with package fence (it rejects an operation whose
// token is below the highest it has seen). Workers report every event, with
// a CLOCK_MONOTONIC timestamp that is comparable across processes of one
// host, to the same server.
//
// The checkers (check.go) read the history:
//
//   - exclusion: no two holders' intervals [acquired, min(released,
//     validity deadline)] overlap;
//   - lost updates: the final counter equals the number of accepted writes;
//   - stale token: no operation is accepted with a token below the highest
//     already accepted;
//   - monotone tokens: tokens strictly increase in acquisition order;
//   - loss before expiry: a hold reported lost was reported before its
//     validity deadline;
//   - done before lease end (many-holds runs): every hold's Done closed
//     before its validity deadline plus the drift allowance;
//   - liveness: after a fault heals, some worker acquires within a bound.
//
// In a semaphore run (RunOptions.Permits, check_permits.go) workers hold
// permits of one semaphore, each permit with its own key, tokens and
// counter: permits checks that no more than N holders' intervals overlap,
// and the checks above run on each permit's own history.
//
// Network faults go through toxiproxy proxies on loopback (proxy.go): a
// worker's links to the servers can be cut (data held, connections left
// open, as in a partition) or slowed. Between the members of an etcd or
// ZooKeeper cluster, Routes (peers.go) puts a proxy on every ordered pair of
// members of a private, peer-routed copy of the cluster
// (topology.PeerRouted), so that one member can be cut off from the others
// in both directions while its clients still reach it.
//
// In a many-holds run (RunOptions.Holds, manyholds.go) one worker holds a
// thousand keys on one Locker, half with Lock and Done and half inside
// dlock.Do, and reports for each hold the instant its Done (or Do's
// context) closed and the validity deadline it last had, as the Locker's
// Observer saw it (Lease and Done themselves read the clock and would
// declare the loss in the watchdog's place). Its store is then cut off: its
// link held (Link.Cut), or on file:// every state file's flock held from
// outside. done-before-lease-end checks that every Done closed before the
// deadline plus driver.DriftAllowance, when the store may end the lease at
// the soonest, however many renewal calls were stalled meanwhile; a second
// worker, with a Locker of its own, then takes over a sample of the keys,
// and the checks above run on each key's own history.
//
// Canary scenarios pause a holder past its lease with an unfenced resource
// and must show a violation: a canary that shows nothing means the harness
// is blind, and fails.
//
// The scenarios need every server topology (make up) and run with
// `make faults`, which writes FAULTS.md.
package faults
