// Package file is dlock's single-host backend (scheme file://): locks that
// exclude each other across the processes of one machine, with no server.
// It is lockctl's default backend.
//
// # URL
//
//	file:///var/lock/myapp     a lock directory (created 0700 if missing)
//	file://                    the default directory, see DefaultDir
//
// The directory must be an absolute path; the host part must be empty or
// "localhost". The backend takes no parameters of its own; the portable
// ttl= and autorenew= apply as everywhere. The longest TTL is MaxTTL (10
// years); a longer one is refused with dlock.ErrInvalidOption when the
// Locker or Mutex is made.
//
// # How it works
//
// Each key has a state file in the directory: a few lines of text holding
// the holder's owner ID, the lease's end (wall clock, UnixNano), the last
// fencing token, the key itself and the holder's description
// (dlock.WithOwner, quoted and padded to a fixed width). Every read-modify-write of a state file
// happens under flock(2) on it, so a lock is a lease record with a TTL, as
// on every other backend: a process that crashes holding a lock blocks the
// key until its lease runs out, and the portable watchdog renews the leases
// of live holders. The file name is the key percent-encoded (every byte
// outside [A-Za-z0-9_-]), or the SHA-256 of a key too long for a file name;
// the key recorded inside the file is checked on every access, so two keys
// never share a lock.
//
// The fencing token is max(last token + 1, wall clock in microseconds): it
// is strictly increasing for a key while its state file lives, and stays
// increasing when the file, or the whole directory, is removed, unless the
// clock is stepped back or more than one lock per microsecond was taken.
// Removing the state file of a free key is therefore harmless; removing the
// file of a held key breaks that hold (its next renewal reports it lost).
//
// Inspect reads the state file under its flock and writes nothing (an
// expired lease reads as free; Waiters counts the waiting Locks' tickets,
// see Waiting).
// Break marks the file free under the flock, keeping the token counter, as
// the package-level Break does: the holder's next renewal, within TTL/3,
// finds the file no longer its own and reports the loss, and the next
// holder's token is higher.
//
// # Waiting
//
// Waiting Locks stand in a line per key, first come first served, and
// only the first in line watches the key. A Lock refused because the key
// is held takes a ticket, under the state file's flock: the next number
// in the key's queue file ("q" + the state file's name, with ".queue"),
// whose byte at that offset it write-locks with an open file description
// lock (fcntl F_OFD_SETLK) for as long as it waits. An attempt is refused
// while the key is held, and also while it is free and a live ticket
// before the caller's waits (any live ticket, for a TryLock or a Lock that
// has none yet), all under the same flock: nobody takes the key ahead of
// a Lock that was waiting, not even its releaser locking again.
//
// Each ticket also has a doorbell: a FIFO named after the queue file and
// the ticket's number, whose read end its Lock keeps open while in line.
// A Lock with a live ticket before its own opens the doorbell of the
// nearest one for writing, in Go's poller, and sleeps: when that ticket's
// Lock leaves the line (it took the key or gave up, and closed its ticket
// first, then its doorbell) or its process ends (the kernel closes its
// descriptors, which drops the ticket's lock too), the FIFO has no reader
// left and the kernel wakes the one writer. It then looks again, and once
// no ticket is before its own it is first in line: it watches the state
// file with inotify(7) (one inotify instance per Locker) and tries if the
// key reads free. So a release wakes one process, the first in line, and
// leaving the line wakes one, the next; the others do not run at all, and
// the work per acquisition does not grow with the number of waiters.
// Where there is no doorbell to ring (one that could not be made), the
// Lock waits in the kernel for the ticket's lock itself (F_OFD_SETLKW), at
// the cost of a thread blocked in a system call. A doorbell left by a
// process that ended is removed by the Lock that was waiting on it; one
// left at the back of the line stays as a name in the directory.
// Inspect's Waiters counts the live tickets.
//
// What a file cannot do is hand the key over, as the Redis queue does:
// no process is there to grant it when its holder's lease simply runs
// out, and a releaser cannot tell whether the first in line is alive and
// running, so the first in line takes the key itself. It wakes when it
// gets to the front, and at every write of the state file (the release,
// but also the holder's renewals, every TTL/3), and tries each time; as
// an expiry writes nothing, it also tries when the holder's remaining
// lease has run out (the portable layer's timer). A waiter whose process
// is stopped (SIGSTOP) keeps its ticket: so that it cannot keep the key
// from everyone, a key left free for a whole TTL (the caller's) with
// tickets waiting is taken by the next attempt, in or out of line. The
// queue file holds only a counter and is never deleted.
//
// # Records
//
// A key's record (driver.Recorder, which dlock.Semaphore uses for its
// number of permits) is a file of its own in the lock directory, named
// "r" + the key's state file name with ".record" for ".lock": no key's
// state file can take that name, and locking, Break and Inspect never open
// it. Record reads the file (one open and read when it exists); otherwise
// it writes the record to a temporary file, fsyncs it and link(2)s it to
// the record's name, which fails if another process linked first, and then
// reads the winner's. ClearRecord reads and removes the file under its
// flock, only if it holds the value given. A record lasts until it is
// cleared or its file is removed; a crash of the host before the directory
// entry reaches the disk can lose it (on tmpfs, so does a reboot).
//
// # What it promises, honestly
//
//   - One host only. flock(2), fcntl(2) locks and inotify do not work
//     across machines: a directory on NFS or another network file system
//     is not supported.
//   - Leases are measured on the host's wall clock, shared by every process
//     of the host. A step of the clock (not a slew) shortens or lengthens
//     the leases running at that moment.
//   - State files are not fsynced: the locks of a host that loses power are
//     void anyway, and tokens do not go back thanks to the clock seed.
//   - The files are created with mode 0666 less the umask; processes of
//     other users can use a directory only if they can write its files.
//   - State files are never deleted by the backend (a key's file holds its
//     token counter); a directory grows by one small file per key ever used.
//
// # Many holds
//
// A hold keeps no file descriptor open: every call opens the key's state
// file, flocks it for one read-modify-write and closes it. So the number
// of holds is not bounded by the open-file limit (RLIMIT_NOFILE bounds
// only the calls running at once) but by renewal work, and the watchdog
// renews every hold each TTL/3: N holds cost 3N/TTL renewals a second,
// 10,000 a second for 100,000 holds at the default 30s TTL and 100,000 a
// second at a 3s TTL. A renewal changes only the lease's end, and every
// field of a state file has a fixed width, so it reads the head of the
// file (up to the owner line) and rewrites the 20 expires digits in
// place, under the same flock: 288 B allocated against some 15 KB for the
// full read-modify-write (BenchmarkRenew, in this package). Its time is
// the seven system calls' (open, flock, fstat, a stat of the name, the
// read, the write, close): 3 µs to 15 µs on the 2-core machine of
// BENCHMARKS.md, on different days. So 100,000 holds at a 3s TTL take
// most of a core, and whether none is lost depends on what else runs:
// none was in the last BENCHMARKS.md run, a few thousand were in the one
// before. The holds that fall due together are renewed in batches
// (RenewBatch), by a few goroutines rather than one per renewal in
// flight; BenchmarkRenewBatch measures a renewal so made.
//
// Acquisitions are bounded the other way: at most 64 attempts of one
// Locker are at work at once, the others waiting for a turn, and a lease
// runs from the moment it is written. A burst of 5,000 Locks through one
// Locker otherwise shared the cores among 5,000 attempts, each took
// seconds, and the leases of the burst and the renewals of the holds
// already taken ran out meanwhile (TestBurstKeepsHolds). Renewals and
// releases take no turn.
//
// # Benchmarks
//
// See the BENCHMARKS section in the package's conformance test file.
//
// # Minimum hold
//
// A minimum hold (dlock.WithMinHold, driver.Lapser) released early sets
// the lease's end in the state file to the end of the minimum, to the
// nanosecond; it outlives the process. An expiry wakes nobody: a waiter
// tries again at the remaining lease its refused attempt read.
package file

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "file"

func init() { dlock.Register(Scheme, open) }

func open(_ context.Context, u *url.URL) (driver.Locker, error) {
	dir, err := dirOf(u)
	if err != nil {
		return nil, err
	}
	if err := driver.NewParams(u).Done(); err != nil {
		return nil, err
	}
	if err := prepare(dir); err != nil {
		return nil, err
	}
	return newDriver(dir), nil
}

// dirOf returns the lock directory named by a file:// URL.
func dirOf(u *url.URL) (string, error) {
	if u.Opaque != "" {
		return "", fmt.Errorf("%w: file:%s: want file:///absolute/dir", driver.ErrInvalidURL, u.Opaque)
	}
	if u.User != nil || (u.Host != "" && u.Host != "localhost") {
		return "", fmt.Errorf("%w: file://%s%s: the host must be empty (one host only); want file:///absolute/dir",
			driver.ErrInvalidURL, u.Host, u.Path)
	}
	if u.Path == "" {
		return DefaultDir(), nil
	}
	if !filepath.IsAbs(u.Path) {
		return "", fmt.Errorf("%w: file://%s: want an absolute directory", driver.ErrInvalidURL, u.Path)
	}
	return filepath.Clean(u.Path), nil
}

// DefaultDir is the directory file:// uses: $XDG_RUNTIME_DIR/dlock when
// XDG_RUNTIME_DIR is set (a per-user tmpfs on systemd hosts), else
// dlock-<uid> in os.TempDir().
func DefaultDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "dlock")
	}
	return filepath.Join(os.TempDir(), "dlock-"+strconv.Itoa(os.Getuid()))
}

// prepare creates dir if needed and checks that it is a directory.
func prepare(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return driver.Unavailable(fmt.Errorf("file: lock directory: %w", err))
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return driver.Unavailable(fmt.Errorf("file: lock directory: %w", err))
	}
	if !fi.IsDir() {
		return driver.Unavailable(fmt.Errorf("file: lock directory %s is not a directory", dir))
	}
	if dir == DefaultDir() {
		// A shared temporary directory: refuse one another user made.
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
			return driver.Unavailable(fmt.Errorf("file: lock directory %s belongs to uid %d, not to this user", dir, st.Uid))
		}
	}
	return nil
}

// New returns a Locker over the lock directory dir (created if missing).
// Every Locker has its own file descriptors and inotify instance: two
// Lockers in one process exclude each other as two processes do.
func New(dir string, opts ...dlock.Option) (*dlock.Locker, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: lock directory %q is not absolute", dlock.ErrInvalidURL, dir)
	}
	dir = filepath.Clean(dir)
	if err := prepare(dir); err != nil {
		return nil, err
	}
	return dlock.NewLocker(newDriver(dir), opts...)
}
