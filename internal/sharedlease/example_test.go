package sharedlease_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/internal/sharedlease"
)

// lease is a store's lease as the example's store keeps it.
type lease struct {
	since time.Time
	ttl   time.Duration
	users int
}

// store keeps one current lease per TTL in memory.
type store struct{ cur map[time.Duration]*lease }

func (s *store) Current(ttl time.Duration) (*lease, error) { return s.cur[ttl], nil }

func (s *store) Clock(l *lease) (time.Time, time.Duration) { return l.since, l.ttl }

func (s *store) Use(l *lease) bool { l.users++; return true }

func (s *store) Refresh(ctx context.Context, l *lease) error {
	l.since = time.Now() // a real store sweeps, then renews on the server
	return nil
}

func (s *store) Replace(ctx context.Context, ttl time.Duration, old *lease) (*lease, error) {
	l := &lease{since: time.Now(), ttl: ttl, users: 1} // a real store grants on the server
	s.cur[ttl] = l
	return l, nil
}

func ExamplePool_Get() {
	p := sharedlease.New[time.Duration, *lease](&store{cur: map[time.Duration]*lease{}})
	a, _ := p.Get(context.Background(), 15*time.Second)
	b, _ := p.Get(context.Background(), 15*time.Second) // fresh: reused as is
	fmt.Println(a == b, b.users)
	// Output: true 2
}
