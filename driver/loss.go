package driver

import "sync"

// Loss is the end signal of one hold, for a driver that implements
// [LossNotifier]: Mark closes the channel that Chan returns (the hold's
// Lost) and starts the functions hung on it with OnLost, each in a
// goroutine of its own.
//
// It does what a context.WithCancel with context.AfterFunc would, for a
// fraction of the memory: no context, no map of children per hold, one
// small record per callback. A Locker holding a hundred thousand locks
// keeps one Loss per hold, so that difference is most of a hold's cost.
//
// The zero value is ready to use; a Loss must not be copied after first
// use.
type Loss struct {
	mu     sync.Mutex
	ch     chan struct{}
	marked bool
	fns    *lossFn // waiting callbacks, newest first
}

type lossFn struct {
	f    func()
	next *lossFn
}

// closedLoss stands for the channel of a Loss marked before Chan was
// called.
var closedLoss = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Chan returns the channel Mark closes: the hold's Lost.
func (l *Loss) Chan() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		if l.marked {
			return closedLoss
		}
		l.ch = make(chan struct{})
	}
	return l.ch
}

// Marked reports whether Mark has been called.
func (l *Loss) Marked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.marked
}

// Mark signals the loss, once: it closes the channel and starts every
// function hung on the Loss. It reports whether this call did it.
func (l *Loss) Mark() bool {
	l.mu.Lock()
	if l.marked {
		l.mu.Unlock()
		return false
	}
	l.marked = true
	if l.ch != nil {
		close(l.ch)
	}
	fns := l.fns
	l.fns = nil
	l.mu.Unlock()
	for n := fns; n != nil; n = n.next {
		go n.f()
	}
	return true
}

// OnLost arranges for f to be called once, in a goroutine of its own, when
// the Loss is marked; at once if it already is. The returned stop undoes
// that, as context.AfterFunc's stop does: it reports whether it kept f from
// being started. It is LossNotifier.OnLost for a hold that carries a Loss.
func (l *Loss) OnLost(f func()) (stop func() bool) {
	l.mu.Lock()
	if l.marked {
		l.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	n := &lossFn{f: f, next: l.fns}
	l.fns = n
	l.mu.Unlock()
	return func() bool { return l.unhang(n) }
}

// unhang removes n from the waiting callbacks, if it is still there.
func (l *Loss) unhang(n *lossFn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p := &l.fns; *p != nil; p = &(*p).next {
		if *p == n {
			*p = n.next
			return true
		}
	}
	return false
}

// ForeignLost is LossNotifier.OnLost for a Hold that is not the driver's
// own: such a hold is treated as lost at once.
func ForeignLost(f func()) (stop func() bool) {
	go f()
	return func() bool { return false }
}
