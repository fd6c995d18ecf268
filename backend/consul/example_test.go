package consul_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/consul"
)

// Open a Locker from a URL. The ACL token, if the agent needs one, comes
// from CONSUL_HTTP_TOKEN, never from the URL.
func Example_open() {
	ctx := context.Background()
	l, err := dlock.Open(ctx, "consul://127.0.0.1:8500/myapp/locks?ttl=15s&lockdelay=5s")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	m, err := l.NewMutex("reports/nightly")
	if err != nil {
		log.Fatal(err)
	}
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		// ctx is cancelled if the session is lost; pass the token to the
		// resource so it can refuse a holder that was paused too long.
		fmt.Println("running under token", m.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Use a Consul client the program already has.
func ExampleNew() {
	client, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	l, err := consul.New(client, consul.Config{Prefix: "myapp/locks", LockDelay: 5 * time.Second}, dlock.WithTTL(20*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // releases the locks; the client stays the caller's

	m, err := l.NewMutex("leader")
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	select {
	case <-m.Done():
		log.Print("lost the lock")
	case <-time.After(time.Second):
		log.Print("did a second of work as leader")
	}
}

// Let the Locker own its clients, made from an api.Config.
func ExampleNewFromConfig() {
	cfg := api.DefaultConfig()
	cfg.Address = "127.0.0.1:8500"
	cfg.Token = "an ACL token with session:write and key:write on myapp/locks"
	l, err := consul.NewFromConfig(cfg, consul.Config{Prefix: "myapp/locks"})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close() // closes the connections it opened
	_ = l
}
