package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
)

// A Locker over the caller's own connection works, refuses TTLs below
// the declared session timeout, and leaves the connection open on Close.
func TestNewOverOwnConn(t *testing.T) {
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	conn := admin(t, raw)
	cfg := Config{SessionTimeout: 2 * time.Second, Prefix: testPrefix}
	if _, err := New(conn, cfg, dlock.WithTTL(time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("New with a TTL below the session timeout: %v; want ErrInvalidOption", err)
	}
	if _, err := New(conn, Config{Prefix: testPrefix}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("New without SessionTimeout: %v; want ErrInvalidOption", err)
	}
	if _, err := New(conn, Config{SessionTimeout: time.Second, Prefix: "no-slash"}); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("New with a bad prefix: %v; want ErrInvalidOption", err)
	}
	l, err := New(conn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("own-conn/%d", time.Now().UnixNano())
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	lockNow(t, m)
	node := onlyNode(t, conn, key)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := conn.Exists(node); err != nil || ok {
		t.Fatalf("after Close: node exists=%v, %v; want released", ok, err)
	}
	if conn.State() != zk.StateHasSession {
		t.Fatalf("Close closed the caller's connection: state %v", conn.State())
	}
}

// acl=creator: nodes are the authenticated user's; another user cannot
// queue on the key and gets an error that says so, not ErrUnavailable.
func TestCreatorACL(t *testing.T) {
	base := endpoint(t, "DLOCK_ZK_URL", "")
	u := hosts(t, base)[0]
	prefix := fmt.Sprintf("%s/acl-%d", testPrefix, time.Now().UnixNano())
	owner := "zk://alice:secret@" + u + prefix + "?session_timeout=2s&acl=creator"
	_, l1 := lockerOn(t, owner)
	_, l2 := lockerOn(t, owner)
	_, other := lockerOn(t, "zk://bob:other@"+u+prefix+"?session_timeout=2s")
	alice := admin(t, base)
	if err := alice.AddAuth("digest", []byte("alice:secret")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		adm := alice
		children, _, _ := adm.Children(prefix)
		for _, c := range children {
			_ = adm.Delete(prefix+"/"+c, -1)
		}
		_ = adm.Delete(prefix, -1)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m1, _ := l1.NewMutex("k")
	m2, _ := l2.NewMutex("k")
	if err := m1.Lock(ctx); err != nil {
		t.Fatalf("Lock as the creator: %v", err)
	}
	if err := m2.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock by the same user while held: %v; want ErrNotAcquired", err)
	}
	mo, _ := other.NewMutex("k")
	err := mo.TryLock(ctx)
	if !errors.Is(err, zk.ErrNoAuth) || errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("TryLock by another user: %v; want zk.ErrNoAuth, not ErrUnavailable", err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.TryLock(ctx); err != nil {
		t.Fatalf("TryLock by the same user after Unlock: %v", err)
	}
	_ = m2.Unlock(ctx)
	acl, _, err := alice.GetACL(prefix)
	if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" {
		t.Fatalf("ACL of the prefix: %+v, %v; want alice's digest only", acl, err)
	}
}
