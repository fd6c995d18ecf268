package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A hold at MaxTTL leaves no lease behind: the lease pool's arithmetic on
// the lease's TTL (three quarters of it) must not overflow, or a released
// lease of the largest TTL counted as about to expire, was dropped from
// the pool without a revoke and outlived its Locker on the server.
func TestMaxTTLLeaseRevokedAtClose(t *testing.T) {
	for _, perHold := range []bool{false, true} {
		name := "shared"
		if perHold {
			name = "per-hold"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, "DLOCK_ETCD_URL")
			e.perHold = perHold
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := e.newLocker(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			key := "max-ttl"
			m, err := l.NewMutex(key, dlock.WithTTL(etcd.MaxTTL))
			if err != nil {
				t.Fatalf("NewMutex with WithTTL(MaxTTL): %v", err)
			}
			if err := m.Lock(ctx); err != nil {
				t.Fatalf("Lock with MaxTTL: %v", err)
			}
			resp, err := e.holder(ctx, key)
			if err != nil || len(resp.Kvs) == 0 {
				t.Fatalf("holder entry: %v, %d entries", err, len(resp.Kvs))
			}
			lease := clientv3.LeaseID(resp.Kvs[0].Lease)
			if err := m.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			ttl, err := e.admin.TimeToLive(ctx, lease)
			if err != nil {
				t.Fatalf("TimeToLive: %v", err)
			}
			if ttl.TTL != -1 {
				_, _ = e.admin.Revoke(ctx, lease)
				t.Fatalf("lease %x of a hold at MaxTTL after Unlock and Close: TTL %ds left on the server; want it revoked", lease, ttl.TTL)
			}
		})
	}
}
