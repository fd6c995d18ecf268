// Package etcdfence is fence's checkers for resources stored in etcd: a
// fence key raised in the same transaction as the caller's operations
// (Checker, for tokens of any backend), and the create-revision guard of a
// lock held in the same etcd (Owner, Txn).
//
// It lives in the etcd backend's module, so that fencing in etcd adds
// nothing beyond etcd's client, and package fence imports no client at all.
// The rule is package fence's; errors are fence's (fence.ErrStale,
// *fence.StaleError, ...).
package etcdfence

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// Owner is the comparison that holds while the lock key lockKey is still
// the one created at revision createRev: the holder's own key has not been
// deleted (released, lease expired) or re-created. It is the check of
// concurrency.Mutex.IsOwner, for resources that live in the same etcd as the
// lock: put it in the If of the transaction that writes the resource.
func Owner(lockKey string, createRev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(lockKey), "=", createRev)
}

// Txn starts a transaction on kv guarded by Owner(lockKey,
// createRev): its Then operations run only while the holder's lock key is
// the one it created. Add Then (and Else) and Commit. A clientv3.Txn takes
// one If; to add comparisons of your own, build the transaction with
// Owner instead.
//
// This fence needs the holder's own key and its create revision
// (concurrency.Mutex's Key and Header().Revision, or the etcd backend's,
// whose token is that create revision). For tokens from any backend, use
// Checker.
func Txn(ctx context.Context, kv clientv3.KV, lockKey string, createRev int64) clientv3.Txn {
	return kv.Txn(ctx).If(Owner(lockKey, createRev))
}

// DefaultPrefix is the key prefix of fences when New is given an empty one.
const DefaultPrefix = "dlock/fence/"

// Checker fences resources stored in etcd with tokens from any backend. The
// highest token seen for a resource is kept at the fence key (the prefix
// followed by the resource key) as 20 zero-padded decimal digits, because
// etcd compares values as bytes: padded, byte order is numeric order.
//
// Do runs the caller's operations in one transaction with the fence:
//
//	If(Value(fenceKey) > token)            // a newer holder was here
//	Then(Get(fenceKey))                    // refused: report its token
//	Else(Put(fenceKey, token), ops...)     // accepted: raise, then act
//
// The rule is written as its negation because etcd's Value comparison is
// false for a key that does not exist, which is exactly the case where the
// token must be accepted. Reads are fenced by passing Get operations.
//
// The fence keys must not overlap the keys the operations touch (etcd
// refuses a transaction that writes one key twice): keep them under their
// own prefix.
type Checker struct {
	kv     clientv3.KV
	prefix string
}

// New returns a checker keeping fences under prefix (DefaultPrefix if
// empty) on kv (a *clientv3.Client, or a namespaced KV). The client stays
// the caller's: the checker never closes it.
func New(kv clientv3.KV, prefix string) (*Checker, error) {
	if kv == nil {
		return nil, fmt.Errorf("%w: etcdfence.New with a nil client", fence.ErrInvalid)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return &Checker{kv: kv, prefix: prefix}, nil
}

// Key returns the fence key of resource.
func (e *Checker) Key(resource string) string { return e.prefix + resource }

// Do runs ops in one transaction if token is accepted for resource, raising
// the fence. It returns the transaction's response with Responses holding
// one entry per op, in order (the fence's own Put is removed), or a
// *StaleError without running any op.
func (e *Checker) Do(ctx context.Context, resource string, token dlock.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := fence.CheckArgs(resource, token); err != nil {
		return nil, err
	}
	key, enc := e.Key(resource), fence.EncodeToken(token)
	accept := append([]clientv3.Op{clientv3.OpPut(key, enc)}, ops...)
	resp, err := e.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), ">", enc)).
		Then(clientv3.OpGet(key)).
		Else(accept...).
		Commit()
	if err != nil {
		return nil, fmt.Errorf("fence: etcd: fenced transaction on %q: %w", resource, err)
	}
	if resp.Succeeded { // refused
		var h dlock.Token
		if len(resp.Responses) == 1 {
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 1 {
				h, err = fence.DecodeToken(string(kvs[0].Value))
				if err != nil {
					return nil, err
				}
			}
		}
		return nil, &fence.StaleError{Resource: resource, Token: token, Highest: h}
	}
	resp.Responses = resp.Responses[1:]
	return resp, nil
}

// Highest returns the highest token seen for resource, 0 if none.
func (e *Checker) Highest(ctx context.Context, resource string) (dlock.Token, error) {
	if err := fence.CheckResource(resource); err != nil {
		return 0, err
	}
	resp, err := e.kv.Get(ctx, e.Key(resource))
	if err != nil {
		return 0, fmt.Errorf("fence: etcd: read fence of %q: %w", resource, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return fence.DecodeToken(string(resp.Kvs[0].Value))
}
