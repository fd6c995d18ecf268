// Package fence is the resource's half of a fencing token: the check that
// makes a token protect something.
//
// A lease-based lock cannot by itself stop a holder that was paused (GC,
// swap, SIGSTOP, a slow network) past its lease from acting after another
// client has taken the lock. Every dlock hold carries a token,
// Mutex.Token(), strictly greater for each new holder of a key. The
// protected resource must check it, and no lock library can do that for it:
// this package does, for resources in memory, on one host (files under a
// directory, with no server) and in PostgreSQL (any database/sql driver);
// packages redisfence (beside the Redis backend) and etcdfence (in the
// etcd backend's module) do it in Redis and in etcd. This package imports
// no store's client: fencing costs a program only the client it already
// has.
//
// # The rule
//
// An operation carrying token t on resource key k is accepted iff t >= the
// highest token seen for k, and it then raises the highest seen to t. Equal
// tokens are accepted: one holder makes many calls with its one token. A
// token of 0 means "no lock held" (no backend issues it) and is always
// refused with ErrNoToken. A refused operation returns a *StaleError, which
// matches ErrStale and carries both numbers. Rule states the rule once,
// with the two numbers named, Rule{Resource: k, Highest: h}.Check(t); every
// checker applies it atomically with the operation, in one statement
// or script of its store, never as a check followed by a separate act (a
// newer holder could pass in between).
//
// # Why reads are fenced
//
// Fencing only writes is not enough for a read-modify-write. Suppose holder
// A (token 5) is paused, its lease expires and B (token 6) takes over:
//
//	B reads stock = 10
//	A wakes and writes stock = 7       (accepted if only writes raise the fence: 5 >= 5)
//	B writes stock = 9                 (accepted: 6 >= 5; A's write is lost)
//
// Because B's read raises the fence to 6, A's write is refused, and B's
// write is based on the value B read. Every checker here therefore fences
// reads too (SQLColumn.Read, redisfence.Checker.Get, etcdfence.Checker.Do with Get
// operations, or a read inside SQLTable.Tx, Memory.Do or Dir.Do).
//
// # Checkers
//
//   - Memory: a Go service that owns the resource. Memory.Do runs the
//     operation while holding the resource's fence, so check and act are
//     one step.
//   - Dir: a resource that the processes of one host share (a file, a
//     local database), beside the file:// lock backend, with no server.
//     OpenDir(dir) keeps each resource's highest token in a file of dir;
//     Dir.Do holds the file's flock(2) across the check and the operation,
//     so it is one step across processes, and waits while another process
//     runs its operation on the same resource. Same API as Memory, except
//     that Highest can fail. Unix only.
//   - SQLTable: any statements in a PostgreSQL transaction. A table
//     dlock_fence(resource text PRIMARY KEY, token bigint NOT NULL) holds
//     one fence per resource; SQLTable.Guard raises it with one INSERT ... ON
//     CONFLICT DO UPDATE ... WHERE token <= $t, which also locks the fence
//     row until the transaction ends, so the statements that follow are
//     fenced too. SQLTable.Tx is the whole pattern.
//   - SQLColumn: rows that carry their own fence, a column
//     fence_token bigint NOT NULL DEFAULT 0. Update, Read (UPDATE ...
//     RETURNING) and Upsert are single statements with the condition
//     fence_token <= $t.
//   - redisfence.Checker (github.com/dlock-go/dlock/backend/redis/redisfence):
//     values stored in Redis, one hash per resource with the fence and the
//     value; Get, Set and Delete are one Lua script call each.
//   - etcdfence.Checker (github.com/dlock-go/dlock/backend/etcd/etcdfence,
//     in the etcd module): keys in etcd. Checker.Do wraps the caller's
//     operations in one transaction with a fence key, for tokens of any
//     backend; etcdfence.Txn and etcdfence.Owner compare the lock key's
//     create revision instead, for a lock held in the same etcd (what
//     concurrency.Mutex.IsOwner checks).
//
// Checkers of your own apply Rule.Check inside one operation of their store
// and call CheckArgs first, so that bad arguments fail as they do here.
//
// The SQL checkers use PostgreSQL syntax ($n parameters, ON CONFLICT,
// RETURNING) through database/sql with any driver; this package imports
// none. Their tests (in the repository's tools/sqlfencetest) use
// github.com/jackc/pgx/v5/stdlib.
//
// # Token ranges
//
// Tokens are uint64. PostgreSQL's bigint is signed, so the SQL checkers
// refuse tokens above MaxSQLToken (2^63-1) with ErrTokenRange rather than
// store them wrapped. No backend comes near: their tokens are counters and
// revisions. Redis and etcd store tokens as 20 zero-padded decimal digits
// (EncodeToken) and compare them exactly over the whole uint64 range.
//
// # What the fence does not do
//
// A fence orders holders; it does not make a stale holder's operation
// succeed, and it cannot protect a resource that does not check it. Fences
// are never deleted: forgetting one would let a stale holder through. The
// fence must live in a store at least as durable as the resource (the same
// store is best, as here). With the create-revision check (etcdfence.Txn), an
// unlock followed by a new lock on the same key is a new owner, exactly as
// with concurrency.Mutex.
//
// # Benchmarks
//
// One accepted fenced operation per iteration, against the servers of the
// test topologies on one shared 2-core machine (so the figures include a
// busy neighbourhood; PostgreSQL 15 with synchronous commit, Redis 7, etcd
// 3.4 with its fsync per write):
//
//	set -a; . .dlock/endpoints.env; set +a
//	go test -run '^$' -bench . -benchtime 2s ./fence/ ./tools/sqlfencetest/ \
//	    ./backend/redis/redisfence/ ./backend/etcd/etcdfence/
//
//	BenchmarkMemoryDo-2           457 ns/op   (parallel, 64 keys)
//	BenchmarkDirDo-2              0.32 ms/op  (ext4: open, flock, read, pwrite, fsync)
//	BenchmarkSQLTableTx-2         0.64 ms/op  (BEGIN, Guard, COMMIT)
//	BenchmarkSQLColumnUpdate-2    0.87 ms/op  (one fenced UPDATE, autocommit)
//	redisfence BenchmarkSet-2     0.21 ms/op  (one EVALSHA)
//	etcdfence BenchmarkDo-2       4.8 ms/op   (one transaction)
//
// See tools/examples/stock in the repository for a complete program: stock
// decrements by worker processes, one of which is stopped with SIGSTOP past
// its lease and whose write is refused when it resumes.
package fence
