package etcd

import (
	"errors"
	"testing"
	"time"
)

// A keepalive extends a lease only once a response that went through
// consensus shows the same raft term (see extension): one answered by a
// leader already replaced (an older term) extends nothing.
func TestKeepaliveNeedsConfirmation(t *testing.T) {
	t0 := time.Now()
	l := &lease{ttl: 2 * time.Second, since: t0, home: 7}

	l.extended(t0.Add(time.Second), 2, 7)
	if since, _ := l.state(); !since.Equal(t0) {
		t.Fatalf("an unconfirmed keepalive moved since to %v", since)
	}
	if got := l.lastSent(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("lastSent = %v; want the unconfirmed keepalive's send time", got)
	}
	if err := l.confirm(7); err != nil {
		t.Fatalf("confirm in the keepalive's own term: %v", err)
	}
	if since, _ := l.state(); !since.Equal(t0.Add(time.Second)) {
		t.Fatalf("a confirmed keepalive left since at %v", since)
	}

	// Answered in term 6 by a leader that term 7 had replaced.
	l.extended(t0.Add(2*time.Second), 2, 6)
	if err := l.confirm(7); !errors.Is(err, errDeposed) {
		t.Fatalf("a keepalive from an older term: confirm = %v, want errDeposed", err)
	}
	if since, _ := l.state(); !since.Equal(t0.Add(time.Second)) {
		t.Fatalf("a deposed leader's keepalive moved since to %v", since)
	}
	if err := l.confirm(7); err != nil {
		t.Fatalf("confirm with nothing pending: %v", err)
	}
	if l.isRetired() {
		t.Fatal("a lease retired although every response showed its home term")
	}
}

// A keepalive answered and confirmed in a later term than the lease's
// grant extends nothing, and the lease is never extended again: the leader
// that granted it may still revoke it (see lease.retired).
func TestKeepaliveOfLaterTermRetires(t *testing.T) {
	t0 := time.Now()
	l := &lease{ttl: 2 * time.Second, since: t0, home: 7}

	l.extended(t0.Add(time.Second), 2, 8)
	if err := l.confirm(8); !errors.Is(err, errRetired) {
		t.Fatalf("a keepalive of a later term: confirm = %v, want errRetired", err)
	}
	if since, _ := l.state(); !since.Equal(t0) {
		t.Fatalf("a keepalive of a later term moved since to %v", since)
	}
	if !l.isRetired() {
		t.Fatal("the lease is not retired")
	}
	// Not even a keepalive answered in the home term brings it back.
	l.extended(t0.Add(2*time.Second), 2, 7)
	if err := l.confirm(7); !errors.Is(err, errRetired) {
		t.Fatalf("a retired lease: confirm = %v, want errRetired", err)
	}
	if since, _ := l.state(); !since.Equal(t0) {
		t.Fatalf("a retired lease was extended to %v", since)
	}
	p := &leasePool{}
	if err := p.keepAlive(t.Context(), l); !errors.Is(err, errRetired) {
		t.Fatalf("keepAlive of a retired lease = %v, want errRetired without a request", err)
	}
}
