package etcd

import (
	"testing"
	"time"
)

// A keepalive extends a lease only once a response that went through
// consensus shows the same raft term (see extension): one answered by a
// leader already replaced (an older term) extends nothing.
func TestKeepaliveNeedsConfirmation(t *testing.T) {
	t0 := time.Now()
	l := &lease{ttl: 2 * time.Second, since: t0}

	l.extended(t0.Add(time.Second), 2, 7)
	if since, _ := l.state(); !since.Equal(t0) {
		t.Fatalf("an unconfirmed keepalive moved since to %v", since)
	}
	if got := l.lastSent(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("lastSent = %v; want the unconfirmed keepalive's send time", got)
	}
	if !l.confirm(7) {
		t.Fatal("confirm in the keepalive's own term failed")
	}
	if since, _ := l.state(); !since.Equal(t0.Add(time.Second)) {
		t.Fatalf("a confirmed keepalive left since at %v", since)
	}

	// Answered in term 7 by a leader that term 8 replaced.
	l.extended(t0.Add(2*time.Second), 2, 7)
	if l.confirm(8) {
		t.Fatal("a keepalive from an older term was confirmed")
	}
	if since, _ := l.state(); !since.Equal(t0.Add(time.Second)) {
		t.Fatalf("a deposed leader's keepalive moved since to %v", since)
	}
	if !l.confirm(8) {
		t.Fatal("confirm with nothing pending reported a dropped keepalive")
	}
}
