package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock/driver"
)

// maxStateSize bounds what is read of a state file: a quoted 4 KiB key
// takes at most about 16 KiB.
const maxStateSize = 64 << 10

// errNoFile: the state file does not exist (and was not to be created).
var errNoFile = errors.New("no state file")

// update runs fn on path's state under an exclusive flock(2) of the file,
// and writes the state back when fn asks to. It and extend (its form for a
// renewal) are the only ways the backend reads or changes a lock: every
// read-modify-write of a key is serialised across all processes of the
// host.
//
// With create, a missing file is created (empty: a key never held);
// without, a missing file is errNoFile.
func update(ctx context.Context, path string, create bool, fn func(s *state, now time.Time) (write bool, err error)) error {
	fd, err := openLocked(ctx, path, create)
	if err != nil {
		return err
	}
	defer unix.Close(fd) // also drops the flock
	return rewrite(fd, path, fn)
}

// rewrite is update's work on fd, open and flocked: read the whole state,
// run fn, write it all back if fn asks to.
func rewrite(fd int, path string, fn func(s *state, now time.Time) (write bool, err error)) error {
	b, st, err := readAllStat(fd)
	if err != nil {
		return unavailable(path, "read", err)
	}
	s, err := parseState(b)
	if err != nil {
		return driver.Unavailable(fmt.Errorf("file: %s: %w (remove the file to reset the key; tokens stay monotonic)", path, err))
	}
	s.modified = st.Mtim.Nano()
	write, err := fn(&s, time.Now())
	if err != nil || !write {
		return err
	}
	out := s.encode()
	if _, err := unix.Pwrite(fd, out, 0); err != nil {
		return unavailable(path, "write", err)
	}
	if len(b) > len(out) { // only when the file was not ours to begin with
		if err := unix.Ftruncate(fd, int64(len(out))); err != nil {
			return unavailable(path, "truncate", err)
		}
	}
	return nil
}

// openLocked opens path and takes an exclusive flock on it, honouring ctx
// while another process holds the flock (for the microseconds of its
// update). It then checks that the locked file is still the one at path: a
// file removed or replaced from outside while we waited would otherwise let
// two processes update two different files for one key.
func openLocked(ctx context.Context, path string, create bool) (int, error) {
	flags := unix.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if create {
		flags |= unix.O_CREAT
	}
	for {
		fd, err := unix.Open(path, flags, 0o666)
		if err != nil {
			if errors.Is(err, unix.ENOENT) && !create {
				return -1, errNoFile
			}
			return -1, unavailable(path, "open", err)
		}
		if err := flock(ctx, fd); err != nil {
			unix.Close(fd)
			if ctx.Err() != nil {
				return -1, err
			}
			return -1, unavailable(path, "flock", err)
		}
		var locked, named unix.Stat_t
		if err := unix.Fstat(fd, &locked); err != nil {
			unix.Close(fd)
			return -1, unavailable(path, "fstat", err)
		}
		err = unix.Stat(path, &named)
		if err == nil && named.Dev == locked.Dev && named.Ino == locked.Ino {
			return fd, nil
		}
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return -1, unavailable(path, "stat", err)
		}
		// Removed or replaced meanwhile: start again on what is there now.
		if err := ctx.Err(); err != nil {
			return -1, err
		}
	}
}

// flock takes an exclusive flock on fd. The flock is held only for one
// read-modify-write, so the wait is short; it is a non-blocking attempt
// repeated with a growing pause, so that ctx is honoured even when the
// other process was stopped in the middle of its update.
func flock(ctx context.Context, fd int) error {
	pause := 20 * time.Microsecond
	var timer *time.Timer
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		switch {
		case err == nil:
			if timer != nil {
				timer.Stop()
			}
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case !errors.Is(err, unix.EWOULDBLOCK):
			return err
		}
		if timer == nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			timer = time.NewTimer(pause)
		} else {
			timer.Reset(pause)
		}
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

func readAll(fd int) ([]byte, error) {
	b, _, err := readAllStat(fd)
	return b, err
}

// readAllStat is readAll that also returns the file's stat.
func readAllStat(fd int) ([]byte, unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, st, err
	}
	if st.Size > maxStateSize {
		return nil, st, fmt.Errorf("state file of %d bytes: %w", st.Size, errCorrupt)
	}
	buf := make([]byte, st.Size)
	n, err := preadFull(fd, buf)
	if err != nil {
		return nil, st, err
	}
	return buf[:n], st, nil
}

func unavailable(path, op string, err error) error {
	return driver.Unavailable(&fs.PathError{Op: op, Path: path, Err: err})
}
