package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd"
)

// A client whose gRPC size limit refuses the server's answers gets the
// same refusal however often a request is sent: Lock must return it as it
// is, not retry it as an unavailability until the caller's context ends
// (for ever, with context.Background). And an acquire the server applied
// but whose answer the client refused must be undone: the key is left
// free.
func TestMessageOverSizeLimitIsNotRetried(t *testing.T) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			e := newEnv(t, tp.envVar)
			// A limit that lets a lease grant's answer through but not a
			// transaction's (a few bytes more): the enqueue is applied, its
			// answer refused.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			g, err := e.admin.Grant(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = e.admin.Revoke(ctx, g.ID)
			grantSize := (&pb.LeaseGrantResponse{Header: g.ResponseHeader, ID: int64(g.ID), TTL: g.TTL}).Size()
			for _, c := range []struct {
				name    string
				limit   int
				perHold bool
			}{
				{"every-answer", 16, false},
				{"after-grant/shared", grantSize + 2, false},
				{"after-grant/lease-per-hold", grantSize + 2, true},
			} {
				t.Run(c.name, func(t *testing.T) {
					cfg := e.cfg
					cfg.MaxCallRecvMsgSize = c.limit
					cli, err := clientv3.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = cli.Close() })
					l, err := etcdNew(cli, etcd.Config{Prefix: e.prefix, LeasePerHold: c.perHold})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = l.Close() })
					m, err := l.NewMutex(c.name)
					if err != nil {
						t.Fatal(err)
					}
					lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					err = m.Lock(lctx)
					if err == nil || errors.Is(err, dlock.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || lctx.Err() != nil {
						t.Fatalf("Lock through a client that refuses the answers for their size: %v; want the refusal itself, before the context ends", err)
					}
					if !strings.Contains(err.Error(), "size limit") {
						t.Fatalf("Lock: %v; want it to name the client's size limit", err)
					}
					other := e.mustLocker(t)
					om, _ := other.NewMutex(c.name)
					if err := om.TryLock(ctx); err != nil {
						t.Fatalf("TryLock by another client after the refused Lock: %v; want the key free", err)
					}
					_ = om.Unlock(ctx)
				})
			}
		})
	}
}
