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
- **7c, fenced**: a Redlock master restarted empty while it carried a hold
  hands the lock to a second client; the two-phase token (and the emptied
  master's TIME-seeded counter) keeps tokens monotone, so the stale write is
  rejected. This assumes instances keep their counters or come back with a
  clock that moved forward; restarting a master only after the longest TTL
  (the Redlock page's delayed restart) avoids the overlap itself.
- **8, isolated** is a SIGSTOP of the leader process: it stops answering
  peers and clients alike. Partitioning only the peer links (peer URLs
  advertised through proxies) is not part of this suite.
- **Liveness** is measured from the heal (kill, restart, resume) to the next
  acquisition, bounded by the backend's TTL, its expiry grace (Consul: 2×TTL)
  and a per-backend allowance for elections.
- CI (.ci/run) runs, after make test, the subset make faults-ci: scenarios 1,
  2, 4 and 6 on Redis and etcd, and 8 on etcd3. The harness also runs on the
  file backend within make test. The whole matrix takes about 7 minutes.
`
