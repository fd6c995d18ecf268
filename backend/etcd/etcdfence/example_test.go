package etcdfence_test

import (
	"context"
	"errors"
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/etcd/etcdfence"
	"github.com/dlock-go/dlock/fence"
)

// Any backend's token fences keys in etcd.
func ExampleChecker_Do() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	f, err := etcdfence.New(cli, "myapp/fence/")
	if err != nil {
		log.Fatal(err)
	}
	var token dlock.Token = 42 // m.Token() of the held lock
	resp, err := f.Do(ctx, "jobs/7", token,
		clientv3.OpGet("myapp/jobs/7"),
		clientv3.OpPut("myapp/jobs/7/state", "running"))
	if errors.Is(err, fence.ErrStale) {
		return // a newer holder owns job 7
	}
	if err != nil {
		log.Fatal(err)
	}
	_ = resp.Responses[0].GetResponseRange() // the Get's result
}

// A lock held in the same etcd fences writes by its key's create revision.
func ExampleTxn() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	s, err := concurrency.NewSession(cli)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, "myapp/locks/jobs/7")
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	resp, err := etcdfence.Txn(ctx, cli, m.Key(), m.Header().Revision).
		Then(clientv3.OpPut("myapp/jobs/7/state", "done")).
		Commit()
	if err == nil && !resp.Succeeded {
		log.Print("the lock was lost; nothing written")
	}
}
