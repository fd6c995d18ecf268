// Command lockctl runs a command under a distributed lock, shows the race
// a lock prevents, compares lock backends, and operates locks.
//
//	lockctl run [flags] KEY -- COMMAND [ARGS...]   like flock(1), on every backend
//	lockctl run --permits N KEY -- COMMAND ...     at most N commands at a time across hosts
//	lockctl run --min-hold D --max-hold D KEY ...  held at least D after it was taken (cron on
//	                                               hosts whose clocks are apart), released at most D after
//	lockctl demo [flags]                           the stock-oversell race, without and with a lock
//	lockctl bench --backend URL [--backend URL ...] [--html FILE] [--json]
//	lockctl status [--json] KEY...                 who holds each key (exit 0 all free, 1 one held)
//	lockctl break --force KEY                      remove a stuck hold (fencing stops the broken holder)
//	lockctl doctor [--json] URL                    the deployment's settings that weaken dlock's promises
//	                                               (exit 0 none, 1 warnings, 2 a promise broken)
//
// Run `lockctl --help` and `lockctl COMMAND --help` for the flags, the
// backend URLs and the exit statuses. The backend is --backend, else
// $DLOCK_URL, else file:// (locks shared by the processes of one host, with
// no server). Every backend of dlock is built in.
//
// lockctl run exits with the command's status, or 64 (usage error), 69
// (backend error), 75 (not acquired: --wait ran out or was 0; another status
// with --conflict-exit-code N, or -E N as flock(1) has it), 76 (the lock
// was lost while the command ran; the command got SIGTERM, then SIGKILL
// after --grace), 126/127 (the command could not be run), 128+N (signal N).
// By default it waits for the lock forever, as flock(1) does.
//
// # Benchmarks
//
// Every backend against the servers of `make up`, on the 2-core
// development machine shared with other builds (so the numbers move by
// 2x from run to run; compare backends within one run):
//
//	lockctl bench --backend mem:// --backend file:///tmp/bl --backend redis://127.0.0.1:6379 \
//	  --backend "$DLOCK_REDLOCK_URL" --backend etcd://127.0.0.1:2379 --backend zk://127.0.0.1:2181 \
//	  --backend consul://127.0.0.1:8500 --html report.html
//
//	SCENARIO       BACKEND                     GOROUTINES   ACQ/S  LOCK P50  LOCK P99  HANDOFF P50  HANDOFF P99  REQ/ACQ
//	uncontended    mem://                               1  126802     1.1µs      42µs            -            -      n/a
//	uncontended    file:///tmp/bl                       1   24036      14µs      94µs            -            -      n/a
//	uncontended    redis://127.0.0.1:6379               1    8318      56µs     185µs            -            -      7.0
//	uncontended    redlock://127.0.0.1:6380+4           1    2277     198µs     695µs            -            -     48.6
//	uncontended    etcd://127.0.0.1:2379                1     723     643µs    2.62ms            -            -      2.0
//	uncontended    zk://127.0.0.1:2181                  1     704     784µs    3.14ms            -            -      4.0
//	uncontended    consul://127.0.0.1:8500              1    1188     340µs    1.40ms            -            -      n/a
//
//	parallel-keys  mem://                               8  400457     1.2µs     105µs            -            -      n/a
//	parallel-keys  file:///tmp/bl                       8   32707      13µs     366µs            -            -      n/a
//	parallel-keys  redis://127.0.0.1:6379               8   16383     207µs    1.38ms            -            -      7.0
//	parallel-keys  redlock://127.0.0.1:6380+4           8    4262     597µs    5.99ms            -            -     47.8
//	parallel-keys  etcd://127.0.0.1:2379                8    1168    1.93ms    26.0ms            -            -      2.0
//	parallel-keys  zk://127.0.0.1:2181                  8    1803    1.78ms    16.2ms            -            -      4.0
//	parallel-keys  consul://127.0.0.1:8500              8    1322    1.83ms    19.6ms            -            -      n/a
//
//	contended      mem://                               8     867    3.34ms   120.0ms         11µs         49µs      n/a
//	contended      file:///tmp/bl                       8     760    5.00ms    44.8ms         93µs        635µs      n/a
//	contended      redis://127.0.0.1:6379               8     609    10.5ms    32.1ms        245µs       2.88ms     16.4
//	contended      redlock://127.0.0.1:6380+4           8     404    16.0ms    55.1ms        733µs       4.94ms     91.6
//	contended      etcd://127.0.0.1:2379                8     291    21.3ms    86.6ms       1.26ms       15.9ms      6.0
//	contended      zk://127.0.0.1:2181                  8     259    21.2ms   277.3ms       1.13ms       16.3ms     15.5
//	contended      consul://127.0.0.1:8500              8     209    28.1ms   136.7ms       2.06ms       21.4ms      n/a
//
// Contended holds the lock 1ms each time, so 1000 acquisitions/s is its
// ceiling. REQ/ACQ counts Redis commands including those run inside Lua
// scripts (summed over Redlock's five masters), etcd gRPC messages and
// ZooKeeper packets, server-wide; Consul's agent metrics are aggregated per
// interval, so lockctl does not count them.
package main

import (
	"context"
	"os"

	"github.com/dlock-go/dlock/tools/internal/lockctl"
)

func main() {
	os.Exit(lockctl.Main(context.Background(), os.Args[1:], lockctl.OSIO()))
}
