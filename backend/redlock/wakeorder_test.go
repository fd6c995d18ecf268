package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/redislua"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// Every instance orders its line by the score each waiter sends, not by
// arrival: two waiters that reach two instances in opposite orders are in
// the same order on both, and one release hands the lock to the same
// waiter on each. Queued by arrival, each instance had its own first
// waiter, and one release would split the lock between them.
func TestWakeQueueSameOrderOnEveryInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, err := url.Parse(testenv.Endpoint(t, "DLOCK_REDLOCK_URL"))
	if err != nil {
		t.Fatal(err)
	}
	hosts := strings.Split(u.Host, ",")
	if len(hosts) < 2 {
		t.Fatalf("want at least 2 instances, have %q", hosts)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	d := &Driver{cfg: Config{Prefix: "dlocktest:redlock:" + hex.EncodeToString(b[:]) + ":"}}
	nm := d.names("k")
	const inbox = "ib"

	clients := make([]*redis.Client, 2)
	woken := make([]<-chan *redis.Message, 2)
	for i := range clients {
		c := redis.NewClient(&redis.Options{Addr: hosts[i], MaxRetries: -1, DialTimeout: time.Second})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
		// Release wakes only a waiter whose inbox has a subscriber.
		sub := c.Subscribe(ctx, redislua.InboxChannel(nm.inbox, inbox))
		t.Cleanup(func() { _ = sub.Close() })
		if _, err := sub.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		woken[i] = sub.Channel()
	}
	attempt := func(c *redis.Client, owner, member string, score int64) []any {
		t.Helper()
		v, err := acquireScript.Run(ctx, c, []string{nm.lock, nm.counter, nm.meta, nm.queue, nm.entries},
			owner, 10_000, "", member, inbox, 15_000, "", score).Slice()
		if err != nil {
			t.Fatalf("acquire as %s: %v", owner, err)
		}
		return v
	}
	for _, c := range clients {
		if v := attempt(c, "holder", "", 0); v[0] != int64(1) {
			t.Fatalf("holder refused: %v", v)
		}
	}
	// The earlier waiter (the lower score) reaches instance 0 last and
	// instance 1 first.
	order := [][2]string{{"late", "early"}, {"early", "late"}}
	score := map[string]int64{"early": 100, "late": 200}
	for i, c := range clients {
		for _, m := range order[i] {
			if v := attempt(c, "owner-"+m, m, score[m]); v[0] != int64(0) {
				t.Fatalf("%s granted on instance %d under a holder: %v", m, i, v)
			}
		}
	}
	for i, c := range clients {
		keys, args := redislua.ReleaseHandoffArgs(nm.queueKeys(), "holder", redislua.Publish, "released", "")
		if n, err := redislua.Release.Run(ctx, c, keys, args...).Int(); err != nil || n != 1 {
			t.Fatalf("release on instance %d: %d, %v", i, n, err)
		}
		select {
		case msg := <-woken[i]:
			if !strings.HasPrefix(msg.Payload, "early:") {
				t.Errorf("instance %d handed the lock over with %q, want early:token:elapsed: the instances order the line differently", i, msg.Payload)
			}
		case <-ctx.Done():
			t.Fatalf("instance %d woke nobody", i)
		}
	}
}

// A waiter keeps its score until an attempt follows a wake: that attempt
// goes to the back of the line (a later score), and never forward, even
// when the clock went back.
func TestPlaceMovesBackOnlyAfterAWake(t *testing.T) {
	kw := &keyWatch{}
	kw.score.Store(100)
	if s := kw.place(0); s != 100 {
		t.Fatalf("first attempt: score %d, want 100", s)
	}
	if s := kw.place(0); s != 100 {
		t.Fatalf("attempt after a timer: score %d, want 100", s)
	}
	before := time.Now().UnixMicro()
	s := kw.place(1)
	if s < before {
		t.Fatalf("attempt after a wake: score %d, want at least the time it was sent (%d)", s, before)
	}
	if again := kw.place(1); again != s {
		t.Fatalf("next attempt without a wake: score %d, want %d", again, s)
	}
	ahead := time.Now().Add(time.Hour).UnixMicro()
	kw.score.Store(ahead)
	if s := kw.place(2); s != ahead+1 {
		t.Fatalf("attempt after a wake with the score ahead of the clock: %d, want %d", s, ahead+1)
	}
}
