package fence

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock"
)

// EtcdOwner is the comparison that holds while the lock key lockKey is still
// the one created at revision createRev: the holder's own key has not been
// deleted (released, lease expired) or re-created. It is the check of
// concurrency.Mutex.IsOwner, for resources that live in the same etcd as the
// lock: put it in the If of the transaction that writes the resource.
func EtcdOwner(lockKey string, createRev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(lockKey), "=", createRev)
}

// EtcdTxn starts a transaction on kv guarded by EtcdOwner(lockKey,
// createRev): its Then operations run only while the holder's lock key is
// the one it created. Add Then (and Else) and Commit. A clientv3.Txn takes
// one If; to add comparisons of your own, build the transaction with
// EtcdOwner instead.
//
// This fence needs the holder's own key and its create revision
// (concurrency.Mutex's Key and Header().Revision, or the etcd backend's,
// whose token is that create revision). For tokens from any backend, use
// Etcd.
func EtcdTxn(ctx context.Context, kv clientv3.KV, lockKey string, createRev int64) clientv3.Txn {
	return kv.Txn(ctx).If(EtcdOwner(lockKey, createRev))
}

// DefaultEtcdPrefix is the key prefix of etcd fences when NewEtcd is given an
// empty one.
const DefaultEtcdPrefix = "dlock/fence/"

// Etcd fences resources stored in etcd with tokens from any backend. The
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
type Etcd struct {
	kv     clientv3.KV
	prefix string
}

// NewEtcd returns a checker keeping fences under prefix (DefaultEtcdPrefix
// if empty) on kv (a *clientv3.Client, or a namespaced KV).
func NewEtcd(kv clientv3.KV, prefix string) (*Etcd, error) {
	if kv == nil {
		return nil, invalid("NewEtcd with a nil client")
	}
	if prefix == "" {
		prefix = DefaultEtcdPrefix
	}
	return &Etcd{kv: kv, prefix: prefix}, nil
}

// Key returns the fence key of resource.
func (e *Etcd) Key(resource string) string { return e.prefix + resource }

// Do runs ops in one transaction if token is accepted for resource, raising
// the fence. It returns the transaction's response with Responses holding
// one entry per op, in order (the fence's own Put is removed), or a
// *StaleError without running any op.
func (e *Etcd) Do(ctx context.Context, resource string, token dlock.Token, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := checkResource(resource); err != nil {
		return nil, err
	}
	if token == 0 {
		return nil, noToken(resource)
	}
	key, enc := e.Key(resource), EncodeToken(token)
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
				h, err = DecodeToken(string(kvs[0].Value))
				if err != nil {
					return nil, err
				}
			}
		}
		return nil, &StaleError{Resource: resource, Token: token, Highest: h}
	}
	resp.Responses = resp.Responses[1:]
	return resp, nil
}

// Highest returns the highest token seen for resource, 0 if none.
func (e *Etcd) Highest(ctx context.Context, resource string) (dlock.Token, error) {
	if err := checkResource(resource); err != nil {
		return 0, err
	}
	resp, err := e.kv.Get(ctx, e.Key(resource))
	if err != nil {
		return 0, fmt.Errorf("fence: etcd: read fence of %q: %w", resource, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return DecodeToken(string(resp.Kvs[0].Value))
}
