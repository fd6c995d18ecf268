//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd || solaris

package fence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock"
)

// Dir fences resources of this host with no server: the highest token of
// each resource is kept in a file of its own in a directory, and every
// check-and-raise happens under flock(2) on that file, so it is atomic
// across all the processes of the host that use the directory, as well as
// across goroutines. It is the fence to use beside the file:// lock
// backend, for a resource on the same host (a file, a local database, a
// device).
//
// Dir applies the same rule as Memory (see Rule): a token is accepted iff
// it is at least the highest seen for the resource, which it then raises;
// 0 is refused with ErrNoToken.
//
// # Files
//
// A resource's fence file is named "f-" + the resource with every byte
// outside [A-Za-z0-9_-] written as %XX, + ".fence"; a resource too long for
// a file name gets "fh-" + the SHA-256 of the resource in hex + ".fence".
// So any non-empty string is a safe resource name, "a/b" and ".."
// included: no name leaves the directory or starts with a dot, and none
// can clash with the file:// backend's state files. The file
// holds the highest token (20 decimal digits, see EncodeToken), a newline
// and the resource itself, which is checked on every access: a file that
// does not read back as this resource's fence is an error, never a fence
// at 0. Fence files are never deleted (forgetting a fence would let a
// stale holder through); the directory grows by one small file per
// resource ever fenced.
//
// A raise is written with pwrite(2) and fsynced before the operation runs
// (once per new token: repeated calls with the token already seen write
// nothing), and so is the directory when a fence file is new, so a fence
// outlives a crash of the host.
//
// # Blocking
//
// Do holds the resource's flock for the whole of op. Another Do, Check or
// Highest on the same resource, in any process, waits for it, with no time
// limit: keep op short. If the process running op is stopped (SIGSTOP, a
// debugger), the others wait until it resumes; if it dies, the kernel
// releases its flock at once and they go on. Operations on different
// resources do not wait for each other.
//
// Only one host: flock(2) does not exclude processes on other machines, so
// the directory must not be on NFS or another network file system. Dir
// exists on Unix systems only (Linux, the BSDs, macOS, Solaris).
//
// A Dir is safe for concurrent use; Dirs opened on the same directory, in
// one process or many, fence together.
type Dir struct {
	dir string

	mu    sync.Mutex
	inUse map[string]*dirTurn // resources with a goroutine in Do, Check or Highest
}

// dirTurn makes the goroutines of one process that fence one resource take
// turns before the flock, so that at most one thread per process and
// resource waits in flock(2).
type dirTurn struct {
	mu    sync.Mutex
	users int
}

// OpenDir returns the fence kept in directory dir, creating it (mode 0700)
// if it is missing. A relative dir is made absolute now.
func OpenDir(dir string) (*Dir, error) {
	if dir == "" {
		return nil, invalid("empty fence directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fence: directory %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("fence: directory: %w", err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("fence: directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fence: %s is not a directory", abs)
	}
	return &Dir{dir: abs}, nil
}

// Path returns the fence directory, absolute.
func (d *Dir) Path() string { return d.dir }

// Do runs op if token is accepted for resource (see Rule), holding the
// resource's fence, in this process and against every other process
// using the directory, for the whole of op, so that no operation with
// another token can pass the fence between the check and op's effect.
//
// The fence is raised to token (written and fsynced) before op runs, and
// stays raised whatever op returns: the token has been seen. Do returns
// op's error; or, without running op, the fence's error (ErrInvalid,
// ErrNoToken, ErrStale) or an error reading or writing the fence file. Do
// waits while another Do on the same resource runs its op (see Blocking).
func (d *Dir) Do(resource string, token dlock.Token, op func() error) error {
	if err := CheckArgs(resource, token); err != nil {
		return err
	}
	if d == nil || d.dir == "" {
		return invalid("Dir not made with OpenDir")
	}
	defer d.turn(resource)()
	fd, path, err := d.openLocked(resource, unix.LOCK_EX, true)
	if err != nil {
		return err
	}
	defer unix.Close(fd) // also releases the flock
	highest, stored, err := readFence(fd, path, resource)
	if err != nil {
		return err
	}
	if err := (Rule{Resource: resource, Highest: highest}).Check(token); err != nil {
		return err
	}
	if token > highest {
		if err := writeFence(fd, path, resource, token); err != nil {
			return err
		}
		if !stored {
			if err := syncDir(d.dir); err != nil {
				return err
			}
		}
	}
	return op()
}

// Check applies the rule and raises the fence, without an operation. It is
// enough when the operation's effect is itself recorded under the same
// fence later, but checking and then acting as two steps is racy: a newer
// holder can pass between them. Prefer Do.
func (d *Dir) Check(resource string, token dlock.Token) error {
	return d.Do(resource, token, func() error { return nil })
}

// Highest returns the highest token seen for resource, 0 if none. It reads
// under a shared flock, so it waits while a Do on resource runs its op,
// and it creates no file.
func (d *Dir) Highest(resource string) (dlock.Token, error) {
	if err := CheckResource(resource); err != nil {
		return 0, err
	}
	if d == nil || d.dir == "" {
		return 0, invalid("Dir not made with OpenDir")
	}
	defer d.turn(resource)()
	fd, path, err := d.openLocked(resource, unix.LOCK_SH, false)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	highest, _, err := readFence(fd, path, resource)
	return highest, err
}

// turn waits for this process's turn at resource and returns the function
// that ends it. An entry lives only while someone uses it, so the map does
// not grow with the number of resources.
func (d *Dir) turn(resource string) func() {
	d.mu.Lock()
	if d.inUse == nil {
		d.inUse = map[string]*dirTurn{}
	}
	t := d.inUse[resource]
	if t == nil {
		t = &dirTurn{}
		d.inUse[resource] = t
	}
	t.users++
	d.mu.Unlock()
	t.mu.Lock()
	return func() {
		t.mu.Unlock()
		d.mu.Lock()
		if t.users--; t.users == 0 {
			delete(d.inUse, resource)
		}
		d.mu.Unlock()
	}
}

// openLocked opens resource's fence file (creating it, empty, if create)
// and flocks it with how (LOCK_EX or LOCK_SH), waiting as long as another
// holder keeps it. It then checks that the locked file is still the one
// named path: a file removed or replaced from outside while we waited
// would let two processes fence one resource in two files.
func (d *Dir) openLocked(resource string, how int, create bool) (int, string, error) {
	path := filepath.Join(d.dir, fenceFileName(resource))
	flags := unix.O_RDWR | unix.O_CLOEXEC | unix.O_NOFOLLOW
	if how == unix.LOCK_SH {
		flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	}
	if create {
		flags |= unix.O_CREAT
	}
	for {
		fd, err := unix.Open(path, flags, 0o666)
		if err != nil {
			return -1, path, fenceFileError("open", path, err)
		}
		for {
			err = unix.Flock(fd, how)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			unix.Close(fd)
			return -1, path, fenceFileError("flock", path, err)
		}
		var locked, named unix.Stat_t
		if err := unix.Fstat(fd, &locked); err != nil {
			unix.Close(fd)
			return -1, path, fenceFileError("fstat", path, err)
		}
		err = unix.Stat(path, &named)
		if err == nil && named.Dev == locked.Dev && named.Ino == locked.Ino {
			return fd, path, nil
		}
		unix.Close(fd)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return -1, path, fenceFileError("stat", path, err)
		}
		// Removed or replaced meanwhile: start again on what is there now.
	}
}

// readFence reads the fence in fd: the highest token, and whether the file
// held one (false for the empty file of a resource never fenced).
func readFence(fd int, path, resource string) (highest dlock.Token, stored bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, false, fenceFileError("fstat", path, err)
	}
	if st.Size == 0 {
		return 0, false, nil
	}
	if st.Size != int64(tokenWidth+1+len(resource)) {
		return 0, false, notFenceFile(path, resource)
	}
	b := make([]byte, st.Size)
	for n := 0; n < len(b); {
		m, err := unix.Pread(fd, b[n:], int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, false, fenceFileError("read", path, err)
		}
		if m == 0 {
			b = b[:n]
			break
		}
		n += m
	}
	digits, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok || len(digits) != tokenWidth || string(rest) != resource {
		return 0, false, notFenceFile(path, resource)
	}
	t, err := DecodeToken(string(digits))
	if err != nil {
		return 0, false, fmt.Errorf("fence: %s: %w", path, err)
	}
	return t, true, nil
}

// writeFence writes token as resource's fence into fd and fsyncs it. The
// content has the same length for every token, so one pwrite replaces it
// whole.
func writeFence(fd int, path, resource string, token dlock.Token) error {
	b := []byte(EncodeToken(token) + "\n" + resource)
	for n := 0; n < len(b); {
		m, err := unix.Pwrite(fd, b[n:], int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fenceFileError("write", path, err)
		}
		n += m
	}
	if err := unix.Fsync(fd); err != nil {
		return fenceFileError("fsync", path, err)
	}
	return nil
}

// syncDir makes a new fence file's directory entry durable.
func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
	if err != nil {
		return fenceFileError("open", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fenceFileError("fsync", dir, err)
	}
	return nil
}

func notFenceFile(path, resource string) error {
	return fmt.Errorf("fence: %s is not the fence file of resource %q (damaged, or written by something else: refusing it rather than reading a fence of 0)", path, resource)
}

func fenceFileError(op, path string, err error) error {
	return fmt.Errorf("fence: %w", &fs.PathError{Op: op, Path: path, Err: err})
}

// maxPlainFenceName bounds the escaped part of a fence file name, well
// under the 255 bytes most file systems allow for one name.
const maxPlainFenceName = 200

// fenceFileName maps a resource to the name of its fence file, injectively
// (percent-encoding) or, for a long resource, by SHA-256; the resource
// recorded in the file is checked on every access either way. The result
// has no '/' and does not start with '.'.
func fenceFileName(resource string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.WriteString("f-")
	for i := 0; i < len(resource) && b.Len() <= maxPlainFenceName+2; i++ {
		c := resource[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	if b.Len() <= maxPlainFenceName+2 {
		return b.String() + ".fence"
	}
	sum := sha256.Sum256([]byte(resource))
	return "fh-" + hex.EncodeToString(sum[:]) + ".fence"
}
