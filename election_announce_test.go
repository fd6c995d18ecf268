package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/memory"
	"github.com/dlock-go/dlock/driver"
)

// The announcement a Campaign leaves stays readable after the leader
// resigned, for one TTL, and is then given back.
func TestElectionAnnouncementRetired(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := memory.New(memory.NewStore(), dlock.WithTTL(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e, _ := l.NewElection("e")
	if err := e.Campaign(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	term := e.Token()
	if err := e.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := l.Inspect(ctx, "dlock-election-leader/e")
	if err != nil || !info.Held || info.Owner != fmt.Sprintf("%d v", term) {
		t.Fatalf("announcement after Unlock: %+v, %v; want held with %q", info, err, fmt.Sprintf("%d v", term))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := l.Inspect(ctx, "dlock-election-leader/e")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("announcement still held long after its TTL: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A value too long to be announced beside its term is observed, whole,
// from the leader's hold while it leads; the next leader's announcement
// replaces it.
func TestElectionObserveLongValue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := memory.NewStore()
	l1, _ := memory.New(st)
	l2, _ := memory.New(st)
	defer l1.Close()
	defer l2.Close()
	obs, _ := l2.NewElection("e")
	seen, err := obs.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("ö", 512)
	e, _ := l1.NewElection("e")
	if err := e.Campaign(ctx, long); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-seen:
		if v.Value != long || v.Token != e.Token() {
			t.Fatalf("observed %d bytes, term %d; want the 1024 bytes whole, term %d", len(v.Value), v.Token, e.Token())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a leader with a 1024-byte value was not observed")
	}
	_ = e.Unlock(ctx)
	next, _ := l2.NewElection("e")
	if err := next.Campaign(ctx, "short"); err != nil {
		t.Fatal(err)
	}
	term := next.Token()
	_ = next.Unlock(ctx)
	select {
	case v := <-seen:
		if v.Value != "short" || v.Token != term {
			t.Fatalf("observed %+v; want short with term %d", v, term)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the next leader, resigned at once, was not observed")
	}
}

// An announcement with a later term than the candidate's means a later
// leader has been elected: the Campaign fails (the candidate resigns)
// rather than announce an older term over it.
func TestElectionStaleAnnouncementRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, _ := memory.New(memory.NewStore())
	defer l.Close()
	later, _ := l.NewMutex("dlock-election-leader/e", dlock.WithOwner("18446744073709551615 later"))
	if err := later.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	e, _ := l.NewElection("e")
	err := e.Campaign(ctx, "v")
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Campaign beside a later announcement: %v; want ErrLockLost", err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after the refused Campaign: %v; want ErrNoLeader", err)
	}
	// An older announcement, or something that is not one, is replaced.
	_ = later.Unlock(ctx)
	other, _ := l.NewMutex("dlock-election-leader/e", dlock.WithOwner("not an announcement"))
	if err := other.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Campaign(ctx, "v"); err != nil {
		t.Fatalf("Campaign beside a foreign hold of the announcement key: %v", err)
	}
	info, _ := l.Inspect(ctx, "dlock-election-leader/e")
	if want := fmt.Sprintf("%d v", e.Token()); info.Owner != want {
		t.Fatalf("announcement %q; want %q", info.Owner, want)
	}
	_ = e.Unlock(ctx)
}

// refusing is the memory driver refusing the announcement key, as Consul
// does during a lock-delay.
type refusing struct {
	driver.Locker
	driver.Inspector
}

func (r refusing) TryAcquire(ctx context.Context, req driver.Request) (driver.Hold, error) {
	if strings.HasPrefix(req.Key, "dlock-election-leader/") {
		return driver.Hold{}, fmt.Errorf("%w: refused for a while", driver.ErrNotAcquired)
	}
	return r.Locker.TryAcquire(ctx, req)
}

// A Campaign whose announcement the store refuses still leads, and is
// observed while it leads.
func TestElectionAnnouncementRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d := memory.NewStore().Driver()
	l, err := dlock.NewLocker(refusing{d, d.(driver.Inspector)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	obs, _ := l.NewElection("e")
	seen, err := obs.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := l.NewElection("e")
	if err := e.Campaign(ctx, "v"); err != nil {
		t.Fatalf("Campaign with the announcement refused: %v", err)
	}
	select {
	case v := <-seen:
		if v.Value != "v" || v.Token != e.Token() {
			t.Fatalf("observed %+v; want v with term %d", v, e.Token())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a leader whose announcement was refused was not observed while it led")
	}
	if err := e.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
