package redis

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// startReplicated starts a primary and one replica and waits until the
// replica is in sync.
func startReplicated(t *testing.T) (primary, replica *tempServer) {
	t.Helper()
	primary = startTempServer(t)
	replica = startTempServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	pc := primary.client()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info := parseInfo(pc.Info(context.Background(), "replication").Val())
		if info["connected_slaves"] == "1" && strings.Contains(info["slave0"], "state=online") {
			return primary, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica never came online: %v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With wait_replicas, a granted lock is on the replica when Lock returns;
// an acquire that too few replicas confirm is undone and fails; a renew
// they do not confirm fails without losing the lock.
func TestWaitReplicas(t *testing.T) {
	primary, replica := startReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pc, rc := primary.client(), replica.client()

	m := openMutex(ctx, t, primary.url()+"?wait_replicas=1&wait_timeout=1s", "k", dlock.WithAutoRenew(false))
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock with one replica confirming: %v", err)
	}
	n := keyNames(DefaultPrefix, "k")
	if v := rc.Get(ctx, n.lock).Val(); v == "" || v != pc.Get(ctx, n.lock).Val() {
		t.Fatalf("replica lock value %q when Lock returned; want the primary's", v)
	}
	if v := rc.Get(ctx, n.fence).Val(); v != strconv.FormatUint(uint64(m.Token()), 10) {
		t.Fatalf("replica counter %q; want the token %d", v, m.Token())
	}
	if err := m.Renew(ctx); err != nil {
		t.Fatalf("Renew with one replica confirming: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}

	// Two replicas asked for, one exists.
	m2 := openMutex(ctx, t, primary.url()+"?wait_replicas=2&wait_timeout=100ms", "k2")
	err := m2.Lock(ctx)
	if !errors.Is(err, ErrReplicas) || !errors.Is(err, dlock.ErrUnavailable) {
		t.Fatalf("Lock with too few replicas: %v; want ErrReplicas and ErrUnavailable", err)
	}
	if m2.Token() != 0 {
		t.Fatal("a refused Lock reports a hold")
	}
	if n := pc.Exists(ctx, keyNames(DefaultPrefix, "k2").lock).Val(); n != 0 {
		t.Fatal("the refused acquire left its lock key on the primary")
	}

	// The replica goes away while a lock is held: renew fails, the lock is
	// not reported lost by that failure alone.
	if err := m.Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	replica.stop()
	err = m.Renew(ctx)
	if !errors.Is(err, ErrReplicas) || errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Renew without the replica: %v; want ErrReplicas, not ErrLockLost", err)
	}
	if v := pc.Get(ctx, n.lock).Val(); v == "" {
		t.Fatal("the failed renew dropped the lock")
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
