package file

import (
	"errors"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock/driver"
)

// watcher is one inotify instance shared by a driver's waiters, with one
// goroutine reading its events. Waiters are woken when a key's state file
// is written (a release, a renewal, a takeover), never by polling.
type watcher struct {
	f *os.File // the inotify descriptor, non-blocking, in Go's poller

	mu     sync.Mutex
	closed bool
	wds    map[int32]*target
	done   chan struct{} // closed when the reader goroutine has returned
}

// target is one watched file and the waiters on it.
type target struct {
	wd   int32
	path string
	dev  uint64
	ino  uint64
	subs map[*fileWatch]struct{}
}

// fileWatch is one waiter's driver.Watch.
type fileWatch struct {
	w      *watcher
	t      *target
	ch     chan struct{}
	broken bool // ch closed; guarded by w.mu
}

const watchMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

func newWatcher() (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, driver.Unavailable(&os.SyscallError{Syscall: "inotify_init1", Err: err})
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), wds: map[int32]*target{}, done: make(chan struct{})}
	go w.read()
	return w, nil
}

// watch starts watching path, creating the file (empty: a free key) if it
// does not exist yet, so that the first write to it is seen.
func (w *watcher) watch(path string) (*fileWatch, error) {
	return w.watchInto(path, make(chan struct{}, 1))
}

// watchInto is watch with the channel to signal (and to close when the
// watch breaks) given: a waiting Lock's line watch (lineWatch) passes its
// own.
func (w *watcher) watchInto(path string, ch chan struct{}) (*fileWatch, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
	if err != nil {
		return nil, unavailable(path, "open", err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		return nil, unavailable(path, "fstat", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, driver.ErrClosed
	}
	raw, err := w.f.SyscallConn()
	if err != nil {
		return nil, driver.Unavailable(err)
	}
	var wd int
	cerr := raw.Control(func(ifd uintptr) {
		wd, err = unix.InotifyAddWatch(int(ifd), path, watchMask)
	})
	if cerr != nil {
		return nil, driver.Unavailable(cerr)
	}
	if err != nil {
		return nil, unavailable(path, "inotify_add_watch", err)
	}
	t := w.wds[int32(wd)]
	if t == nil {
		t = &target{wd: int32(wd), path: path, subs: map[*fileWatch]struct{}{}}
		w.wds[int32(wd)] = t
	}
	// The watch follows the inode found now; if path was replaced between
	// the open and the watch, the first event breaks the watch and the
	// portable layer makes a new one.
	t.dev, t.ino = uint64(st.Dev), uint64(st.Ino)
	fw := &fileWatch{w: w, t: t, ch: ch}
	t.subs[fw] = struct{}{}
	return fw, nil
}

func (fw *fileWatch) Changed() <-chan struct{} { return fw.ch }

// poke signals fw's channel as a change of its file would, unless the
// watch has broken.
func (fw *fileWatch) poke() {
	fw.w.mu.Lock()
	defer fw.w.mu.Unlock()
	if !fw.broken {
		select {
		case fw.ch <- struct{}{}:
		default:
		}
	}
}

func (fw *fileWatch) Close() error {
	w := fw.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if fw.broken {
		return nil
	}
	delete(fw.t.subs, fw)
	if len(fw.t.subs) == 0 && w.wds[fw.t.wd] == fw.t {
		delete(w.wds, fw.t.wd)
		w.rmWatch(fw.t.wd)
	}
	return nil
}

// rmWatch removes wd from the inotify instance. Called with w.mu held.
func (w *watcher) rmWatch(wd int32) {
	if w.closed {
		return
	}
	if raw, err := w.f.SyscallConn(); err == nil {
		_ = raw.Control(func(ifd uintptr) { _, _ = unix.InotifyRmWatch(int(ifd), uint32(wd)) })
	}
}

// read dispatches events until the inotify descriptor is closed.
func (w *watcher) read() {
	defer close(w.done)
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Anything else (overflow reads fine; this is unexpected):
			// break every watch so waiters fall back and re-watch.
			w.breakAll()
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			w.event(ev.Wd, ev.Mask)
			off += unix.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

// event wakes the waiters of wd. When the watched file is gone, replaced or
// no longer watched, it also breaks their watches (closes their channels)
// so that the portable layer watches the file now at the path.
func (w *watcher) event(wd int32, mask uint32) {
	if wd == -1 && mask&unix.IN_Q_OVERFLOW != 0 {
		w.wakeAll() // events were dropped: any key may have changed
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.wds[wd]
	if t == nil {
		return
	}
	broken := mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0
	if !broken && mask&unix.IN_ATTRIB != 0 {
		// Attributes change on unlink too: is the watched file still there?
		var st unix.Stat_t
		err := unix.Stat(t.path, &st)
		broken = err != nil || uint64(st.Dev) != t.dev || uint64(st.Ino) != t.ino
	}
	for fw := range t.subs {
		select {
		case fw.ch <- struct{}{}:
		default:
		}
	}
	if broken {
		delete(w.wds, wd)
		if mask&unix.IN_IGNORED == 0 {
			w.rmWatch(wd)
		}
		for fw := range t.subs {
			fw.broken = true
			close(fw.ch)
		}
		t.subs = nil
	}
}

func (w *watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.wds {
		for fw := range t.subs {
			select {
			case fw.ch <- struct{}{}:
			default:
			}
		}
	}
}

func (w *watcher) breakAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, t := range w.wds {
		for fw := range t.subs {
			fw.broken = true
			close(fw.ch)
		}
		delete(w.wds, wd)
	}
}

// close stops the reader goroutine and breaks the watches still open.
func (w *watcher) close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.f.Close()
	<-w.done
	w.breakAll()
	return err
}
