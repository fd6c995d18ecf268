package zookeeper

import (
	"encoding/binary"
	"sync"
	"time"
)

// opSetWatches is the opcode of the request go-zookeeper sends, on a
// connection that resumed its session, to set its watches again.
const opSetWatches = 101

// replyFallback is how long a resumed connection holds its first answers
// back when no request setting the watches again goes out: go-zookeeper
// sends none when it has no watch.
const replyFallback = 100 * time.Millisecond

// replyGate holds back the answers on a connection that resumed its
// session until go-zookeeper has sent its watches again.
//
// On such a connection go-zookeeper (v1.0.4) starts its receive loop and
// then reads the last zxid it saw, without a lock, to set its watches
// again; the receive loop writes that zxid for every answer it reads. The
// requests queued during the disconnection go out at once, so their
// answers can race with that read: a data race in the library (pull
// request #35 of go-zookeeper/zk, open, not in a release), which the race
// detector reports in the tests of any program whose ZooKeeper connection
// moves while it has watches and requests in flight. The value is a 64-bit
// word the library uses only to set the watches again, so the race is
// harmless on the platforms Go supports, but a test run with -race that
// sees it fails.
//
// The request that sets the watches again leaves after that read, so a
// receive loop that reads its first answer only once that request was
// written is ordered after the read. The gate costs nothing on a new
// session (go-zookeeper has no watch to set again) and at most
// replyFallback on a resumed one without watches.
type replyGate struct {
	open     chan struct{}
	once     sync.Once
	fallback time.Duration
	passed   bool // read only by the receive loop
}

func newReplyGate(fallback time.Duration) *replyGate {
	return &replyGate{open: make(chan struct{}), fallback: fallback}
}

// sent sees each frame the client writes after the handshake.
func (g *replyGate) sent(frame []byte) {
	if len(frame) >= 12 && int32(binary.BigEndian.Uint32(frame[8:])) == opSetWatches {
		g.release()
	}
}

// release lets the answers through: the watches went out, or the
// connection closed.
func (g *replyGate) release() {
	g.once.Do(func() { close(g.open) })
}

// wait is called by the receive loop before each read: the first one
// waits for release or the fallback.
func (g *replyGate) wait() {
	if g.passed {
		return
	}
	t := time.NewTimer(g.fallback)
	defer t.Stop()
	select {
	case <-g.open:
	case <-t.C:
	}
	g.passed = true
}
