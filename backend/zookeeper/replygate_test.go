package zookeeper

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// frame is a client frame: length, xid, opcode and a body of zeros.
func frame(opcode int32) []byte {
	b := make([]byte, 20)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:], 7)
	binary.BigEndian.PutUint32(b[8:], uint32(opcode))
	return b
}

// returnsWithin reports whether f returns within d.
func returnsWithin(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

func TestReplyGateOpensOnSetWatches(t *testing.T) {
	g := newReplyGate(time.Hour)
	waited := make(chan struct{})
	go func() { defer close(waited); g.wait() }()
	g.sent(frame(11)) // ping
	g.sent(frame(4))  // getData
	g.sent([]byte{0, 0, 0})
	select {
	case <-waited:
		t.Fatal("the receive loop read before the watches were sent again")
	case <-time.After(50 * time.Millisecond):
	}
	g.sent(frame(opSetWatches))
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the receive loop still waits after the watches were sent again")
	}
	if !returnsWithin(10*time.Second, g.wait) {
		t.Fatal("a later read waits")
	}
}

func TestReplyGateFallsBackWithoutWatches(t *testing.T) {
	g := newReplyGate(10 * time.Millisecond)
	if !returnsWithin(10*time.Second, g.wait) {
		t.Fatal("with no watches to set again the receive loop waits past its fallback")
	}
}

// connectFrames are a connect request asking for session asked and the
// server's answer granting session granted (timeout 4 s, no password).
func connectFrames(asked, granted int64) (req, resp []byte) {
	req = make([]byte, 4+4+8+4+8+4)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	binary.BigEndian.PutUint64(req[20:], uint64(asked))
	resp = make([]byte, 4+4+4+8+4)
	binary.BigEndian.PutUint32(resp, uint32(len(resp)-4))
	binary.BigEndian.PutUint32(resp[8:], 4000)
	binary.BigEndian.PutUint64(resp[12:], uint64(granted))
	return req, resp
}

// A connection gates its answers only when the server resumed the session
// the client asked for; closing it lets a waiting read through.
func TestObservedConnGatesOnlyResumedSessions(t *testing.T) {
	for _, c := range []struct {
		name           string
		asked, granted int64
		gated          bool
	}{
		{"new", 0, 0x51, false},
		{"expired", 0x50, 0x51, false},
		{"resumed", 0x51, 0x51, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer server.Close()
			var got session
			oc := &observedConn{Conn: client, onSession: func(s session) { got = s }}
			req, resp := connectFrames(c.asked, c.granted)
			go func() {
				buf := make([]byte, len(req))
				_, _ = server.Read(buf)
				_, _ = server.Write(resp)
			}()
			if _, err := oc.Write(req); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(resp))
			if _, err := oc.Read(buf); err != nil {
				t.Fatal(err)
			}
			if got.id != c.granted || got.timeout != 4*time.Second {
				t.Fatalf("session %+v; want id 0x%x, timeout 4s", got, c.granted)
			}
			if (oc.gate != nil) != c.gated {
				t.Fatalf("gated %v; want %v", oc.gate != nil, c.gated)
			}
			if !c.gated {
				return
			}
			oc.gate.fallback = time.Hour
			read := make(chan error, 1)
			go func() {
				_, err := oc.Read(make([]byte, 4))
				read <- err
			}()
			select {
			case err := <-read:
				t.Fatalf("a read on the resumed connection passed the gate: %v", err)
			case <-time.After(50 * time.Millisecond):
			}
			_ = oc.Close()
			select {
			case err := <-read:
				if err == nil {
					t.Fatal("a read on the closed connection returned no error")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a read held by the gate still waits after Close")
			}
		})
	}
}
