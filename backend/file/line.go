package file

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock/driver"
)

// The line: waiting Locks take tickets, and wait for the ticket before
// theirs to go. See "Waiting" in the package doc.
//
// A key's queue file ("q" + its state file's name with ".queue" for
// ".lock") holds the last ticket given, as 20 digits; ticket t is the
// byte t of the file, write-locked (an open file description lock,
// F_OFD_SETLK) by its waiter from taking the ticket until it leaves the
// line: when it takes the key, gives up, or its process ends. Tickets are
// taken, and the line is read, only under the state file's flock.

// queueName maps a key to its queue file's name ("qk-jobs.queue"); like a
// record's, it cannot be any key's state file name.
func queueName(key string) string {
	return "q" + strings.TrimSuffix(fileName(key), ".lock") + ".queue"
}

// lineWatch is a waiting Lock's watch (driver.LockWatcher) and its place
// in the key's line. Its channel is signalled only once the Lock is first
// in line: when it gets there, and then on every write of the state file
// (a release, a renewal, a Break).
type lineWatch struct {
	d     *fileDriver
	key   string
	path  string // the state file
	qpath string // the queue file
	ch    chan struct{}

	mu     sync.Mutex
	closed bool
	broken bool       // ch closed by the line itself (not by fw)
	ticket int64      // 0 until the first refused attempt
	tfd    int        // the queue file, holding the ticket's lock; -1 without
	bell   int        // the read end of the ticket's doorbell; -1 without
	fw     *fileWatch // the state file's inotify watch, once first in line
	ring   *os.File   // the doorbell of the ticket waited on, while waiting
}

// WatchLock (driver.LockWatcher) returns the watch of a Lock about to
// try key. Its first refused attempt gives it a ticket; from then on its
// attempts are refused while a live ticket before its own waits, and only
// the first in line watches the state file.
func (d *fileDriver) WatchLock(ctx context.Context, key string) (driver.Watch, error) {
	if err := d.check(ctx); err != nil {
		return nil, err
	}
	lw := &lineWatch{d: d, key: key, path: d.path(key), qpath: filepath.Join(d.dir, queueName(key)),
		ch: make(chan struct{}, 1), tfd: -1, bell: -1}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lines[key] != nil { // the portable layer's gate makes this impossible
		return nil, driver.Unavailable(errors.New("file: two Locks of one Locker wait for one key"))
	}
	if d.lines == nil {
		d.lines = map[string]*lineWatch{}
	}
	d.lines[key] = lw
	return lw, nil
}

// line returns the watch of the Lock of this driver waiting for key, nil
// when none does.
func (d *fileDriver) line(key string) *lineWatch {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lines[key]
}

// refuse is TryAcquire's decision, under the state file's flock: nil when
// the caller may take the key; otherwise the error to return. A key is
// refused while it is held, and while it is free with a live ticket before
// the caller's (any live ticket, for a caller with none): the first in
// line takes it. Unless the line has let the key stay free for a whole
// ttl since it freed: a waiter stopped (SIGSTOP) with its ticket must not
// keep the key from everyone, so the next attempt after that takes it. A
// refused Lock (lw not nil) takes a ticket if it has none.
func (d *fileDriver) refuse(key string, lw *lineWatch, s *state, now time.Time, ttl time.Duration) error {
	held := s.heldAt(now)
	var ahead bool
	if !held {
		var err error
		if ahead, err = d.lineAhead(key, lw); err != nil {
			return err
		}
	}
	stuckAt := s.freeSince() + int64(ttl)
	if !held && (!ahead || now.UnixNano() >= stuckAt) {
		return nil
	}
	if lw != nil {
		if err := lw.join(); err != nil {
			return err
		}
	}
	if held {
		return &driver.HeldError{Remaining: s.remaining(now)}
	}
	return &driver.HeldError{Remaining: time.Duration(stuckAt - now.UnixNano())}
}

// lineAhead reports whether a live ticket waits before lw's (any, when lw
// has none or is nil).
func (d *fileDriver) lineAhead(key string, lw *lineWatch) (bool, error) {
	if lw != nil {
		lw.mu.Lock()
		fd, t := lw.tfd, lw.ticket
		lw.mu.Unlock()
		if fd >= 0 {
			_, ok, err := probe(fd, 1, t-1)
			if err != nil {
				return false, unavailable(lw.qpath, "fcntl", err)
			}
			return ok, nil
		}
	}
	qpath := filepath.Join(d.dir, queueName(key))
	fd, err := unix.Open(qpath, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return false, nil // nobody ever queued
	}
	if err != nil {
		return false, unavailable(qpath, "open", err)
	}
	defer unix.Close(fd)
	_, ok, err := probeLen(fd, 1, 0)
	if err != nil {
		return false, unavailable(qpath, "fcntl", err)
	}
	return ok, nil
}

// probe looks for a ticket (a write lock of another open file
// description) among the n bytes from start, and returns one.
func probe(fd int, start, n int64) (int64, bool, error) {
	if n <= 0 {
		return 0, false, nil
	}
	return probeLen(fd, start, n)
}

// probeLen is probe where n 0 means every byte from start on.
func probeLen(fd int, start, n int64) (int64, bool, error) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: start, Len: n}
	if err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk); err != nil {
		return 0, false, err
	}
	if lk.Type == unix.F_UNLCK {
		return 0, false, nil
	}
	return lk.Start, true, nil
}

// join gives lw the next ticket, under the state file's flock, and starts
// its wait for the tickets before it; nothing when it has one.
func (lw *lineWatch) join() error {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.ticket != 0 || lw.closed {
		return nil
	}
	fd, err := unix.Open(lw.qpath, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
	if err != nil {
		return unavailable(lw.qpath, "open", err)
	}
	t, err := nextTicket(fd)
	if err == nil {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: t, Len: 1}
		err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
	}
	if err != nil {
		unix.Close(fd)
		return unavailable(lw.qpath, "ticket", err)
	}
	lw.tfd, lw.ticket = fd, t
	lw.bell = openBell(bellPath(lw.qpath, t))
	if _, ahead, err := probe(fd, 1, t-1); err == nil && !ahead {
		// First in line: watch the state file now, under its flock, so
		// that the release to come is seen.
		lw.headLocked(false)
		return nil
	}
	go lw.waitTurn(t)
	return nil
}

// nextTicket reads the last ticket given from the queue file, writes the
// next and returns it.
func nextTicket(fd int) (int64, error) {
	var buf [20]byte
	n, err := preadFull(fd, buf[:])
	if err != nil {
		return 0, err
	}
	var last int64
	if s := strings.TrimSpace(string(buf[:n])); s != "" {
		if last, err = strconv.ParseInt(s, 10, 64); err != nil || last < 0 {
			last = 0 // a damaged counter: tickets start again, still in order
		}
	}
	digits, _ := fixed20(last + 1)
	if _, err := unix.Pwrite(fd, digits[:], 0); err != nil {
		return 0, err
	}
	return last + 1, nil
}

// waitTurn waits for every ticket before t to go (its Lock took the key
// or gave up, or its process ended), one at a time, nearest first; then
// lw is first in line. It waits on the doorbell of the nearest ticket
// before its own: a FIFO whose read end that ticket's Lock keeps open
// while it is in line, opened here for writing, in Go's poller. When the
// last reader goes (closed, or with its process), the kernel reports an
// error on the write end (EPOLLERR), which wakes this goroutine only.
// Without a doorbell to ring (one that could not be made, or whose
// reader went just before its ticket), it asks, blocked in the kernel,
// for a read lock on that ticket, granted when the ticket's write lock
// goes. It runs in a goroutine of its own; Close ends its wait.
func (lw *lineWatch) waitTurn(t int64) {
	fd, err := unix.Open(lw.qpath, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		lw.fail()
		return
	}
	defer unix.Close(fd)
	for {
		p, ok, err := nearest(fd, t)
		if err != nil {
			lw.fail()
			return
		}
		if !ok {
			lw.mu.Lock()
			lw.headLocked(true)
			lw.mu.Unlock()
			return
		}
		rang, closed := lw.ringBell(bellPath(lw.qpath, p))
		if closed {
			return
		}
		if rang {
			if _, live, err := probe(fd, p, 1); err == nil && !live {
				_ = unix.Unlink(bellPath(lw.qpath, p)) // left behind by a process that ended
				continue
			}
		}
		// No doorbell, or its reader went before its ticket did: wait in
		// the kernel for the ticket's lock.
		lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart, Start: p, Len: 1}
		err = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLKW, &lk)
		if err != nil && !errors.Is(err, unix.EINTR) {
			lw.fail()
			return
		}
		lk.Type = unix.F_UNLCK
		_ = unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, &lk)
		lw.mu.Lock()
		closed = lw.closed
		lw.mu.Unlock()
		if closed {
			return
		}
	}
}

// bellPath is the doorbell of ticket t in the queue file at qpath.
func bellPath(qpath string, t int64) string { return qpath + "." + strconv.FormatInt(t, 10) }

// openBell makes the doorbell FIFO at path and opens its read end, which
// the caller keeps while it is in line; -1 when it cannot (the waiter
// after it then waits in the kernel on its ticket instead).
func openBell(path string) int {
	_ = unix.Unlink(path) // a FIFO left by a process that ended
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return -1
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		_ = unix.Unlink(path)
		return -1
	}
	return fd
}

// ringBell waits until the doorbell at path has no reader left. It
// reports false at once when there is no doorbell or it already has no
// reader, and closed when lw was closed meanwhile.
func (lw *lineWatch) ringBell(path string) (rang, closed bool) {
	wfd, err := unix.Open(path, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil { // ENXIO: nobody reads it any more; ENOENT: none
		return false, false
	}
	f := os.NewFile(uintptr(wfd), path) // non-blocking: in Go's poller
	lw.mu.Lock()
	if lw.closed {
		lw.mu.Unlock()
		f.Close()
		return false, true
	}
	lw.ring = f
	lw.mu.Unlock()
	defer func() {
		lw.mu.Lock()
		lw.ring = nil
		closed = lw.closed
		lw.mu.Unlock()
		f.Close()
	}()
	rc, err := f.SyscallConn()
	if err != nil {
		return false, false
	}
	err = rc.Read(func(fd uintptr) bool {
		pfd := []unix.PollFd{{Fd: int32(fd)}}
		_, _ = unix.Poll(pfd, 0)
		return pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0
	})
	return err == nil, false
}

// nearest returns the live ticket nearest before t, if any.
func nearest(fd int, t int64) (int64, bool, error) {
	low, ok, err := probe(fd, 1, t-1)
	if err != nil || !ok {
		return 0, false, err
	}
	for p := t - 1; p > low; p-- { // tickets given up leave gaps
		if _, ok, err := probe(fd, p, 1); err != nil || ok {
			return p, ok, err
		}
	}
	return low, true, nil
}

// headLocked makes lw first in line: it watches the state file from now
// on, and, with poke, tries at once. lw.mu held.
func (lw *lineWatch) headLocked(poke bool) {
	if lw.closed || lw.fw != nil || lw.broken {
		return
	}
	w, err := lw.d.inotify()
	if err == nil {
		lw.fw, err = w.watchInto(lw.path, lw.ch)
	}
	if err != nil {
		lw.broken = true
		close(lw.ch) // the portable layer watches again
		return
	}
	if poke && !looksHeld(lw.path) {
		lw.fw.poke()
	}
}

// looksHeld reads the head of the state file at path without its flock,
// and reports whether it shows a live lease: a Lock that gets to the
// front of the line just after the one before it took the key need not
// try (a whole flocked read-modify-write) to learn that it is held. Its
// watch is already set up, so the release to come wakes it; when the file
// cannot be read or parsed (a write under way, a v1 file) it tries.
func looksHeld(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var buf [headMax]byte
	n, err := preadFull(fd, buf[:])
	if err != nil {
		return false
	}
	s, ok := parseHead(buf[:n])
	return ok && s.heldAt(time.Now())
}

// fail breaks lw's watch when its wait cannot go on: the portable layer
// closes it and watches again.
func (lw *lineWatch) fail() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.closed || lw.fw != nil || lw.broken {
		return
	}
	lw.broken = true
	close(lw.ch)
}

func (lw *lineWatch) Changed() <-chan struct{} { return lw.ch }

// Close leaves the line: the ticket's lock goes with its descriptor, and
// the waiter after it wakes.
func (lw *lineWatch) Close() error {
	lw.mu.Lock()
	if lw.closed {
		lw.mu.Unlock()
		return nil
	}
	lw.closed = true
	fd, bell, fw, ring := lw.tfd, lw.bell, lw.fw, lw.ring
	lw.tfd, lw.bell = -1, -1
	lw.mu.Unlock()
	if ring != nil {
		_ = ring.Close() // ends waitTurn's wait
	}
	lw.d.mu.Lock()
	if lw.d.lines[lw.key] == lw {
		delete(lw.d.lines, lw.key)
	}
	lw.d.mu.Unlock()
	if fw != nil {
		_ = fw.Close()
	}
	var err error
	if fd >= 0 {
		// The ticket goes first: the Lock after this one, woken by the
		// doorbell, must find the ticket gone.
		err = unix.Close(fd)
	}
	if bell >= 0 {
		_ = unix.Unlink(bellPath(lw.qpath, lw.ticket))
		_ = unix.Close(bell)
	}
	return err
}

// lineLen counts the live tickets in the queue file at qpath: the Locks
// waiting for its key (Inspect's Waiters).
func lineLen(qpath string) (int, error) {
	fd, err := unix.Open(qpath, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(qpath, "open", err)
	}
	defer unix.Close(fd)
	low, ok, err := probeLen(fd, 1, 0)
	for ok && err == nil { // probe returns some ticket; go down to the first
		var lower int64
		if lower, ok, err = probe(fd, 1, low-1); ok {
			low = lower
		}
	}
	if err != nil {
		return 0, unavailable(qpath, "fcntl", err)
	}
	if low == 0 {
		return 0, nil
	}
	var buf [20]byte
	n, err := preadFull(fd, buf[:])
	if err != nil {
		return 0, unavailable(qpath, "read", err)
	}
	last, _ := strconv.ParseInt(strings.TrimSpace(string(buf[:n])), 10, 64)
	count := 0
	for t := low; t <= last; t++ {
		_, ok, err := probe(fd, t, 1)
		if err != nil {
			return 0, unavailable(qpath, "fcntl", err)
		}
		if ok {
			count++
		}
	}
	return count, nil
}
