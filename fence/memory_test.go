package fence_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

func TestMemoryRule(t *testing.T) {
	var m fence.Memory
	ran := 0
	op := func() error { ran++; return nil }

	if err := m.Do("a", 5, op); err != nil {
		t.Fatalf("first token refused: %v", err)
	}
	if err := m.Do("a", 5, op); err != nil {
		t.Fatalf("equal token refused: %v", err)
	}
	err := m.Do("a", 4, op)
	var se *fence.StaleError
	if !errors.As(err, &se) || !errors.Is(err, fence.ErrStale) || se.Token != 4 || se.Highest != 5 {
		t.Fatalf("lower token: got %v, want StaleError{4, 5}", err)
	}
	if ran != 2 {
		t.Fatalf("op ran %d times, want 2 (never for the stale token)", ran)
	}
	// Per-key independence: "b" has seen nothing.
	if err := m.Do("b", 1, op); err != nil {
		t.Fatalf("token 1 on another key refused: %v", err)
	}
	if got := m.Highest("a"); got != 5 {
		t.Errorf("Highest(a) = %d, want 5", got)
	}
	if got := m.Highest("b"); got != 1 {
		t.Errorf("Highest(b) = %d, want 1", got)
	}
	if got := m.Highest("never"); got != 0 {
		t.Errorf("Highest(never) = %d, want 0", got)
	}
	if err := m.Do("a", 9, op); err != nil {
		t.Fatalf("higher token refused: %v", err)
	}
	if err := m.Check("a", 5); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 5 after 9: got %v, want ErrStale", err)
	}
}

func TestMemoryBadInput(t *testing.T) {
	var m fence.Memory
	ran := false
	if err := m.Do("a", 0, func() error { ran = true; return nil }); !errors.Is(err, fence.ErrNoToken) {
		t.Errorf("token 0: got %v, want ErrNoToken", err)
	}
	if err := m.Do("", 1, func() error { ran = true; return nil }); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("empty key: got %v, want ErrInvalid", err)
	}
	if ran {
		t.Error("op ran on bad input")
	}
	if m.Highest("a") != 0 {
		t.Error("token 0 raised the fence")
	}
}

func TestMemoryOpErrorKeepsFence(t *testing.T) {
	var m fence.Memory
	boom := errors.New("boom")
	if err := m.Do("a", 7, func() error { return boom }); err != boom {
		t.Fatalf("got %v, want op's error", err)
	}
	if got := m.Highest("a"); got != 7 {
		t.Errorf("Highest = %d after a failed op, want 7: the token was seen", got)
	}
}

// TestMemoryConcurrent has many goroutines offer random tokens on a few
// keys. Each op mutates plain per-key state without synchronisation of its
// own, so the race detector checks that Do serialises a key's ops; the ops
// check that accepted tokens never go down, and the final fence is the
// largest token offered.
func TestMemoryConcurrent(t *testing.T) {
	const keys, goroutines, perG = 4, 32, 300
	var m fence.Memory
	type state struct {
		last     dlock.Token // written only inside Do
		accepted int
		inside   atomic.Int32
	}
	st := make([]*state, keys)
	for i := range st {
		st[i] = &state{}
	}
	var maxOffered [keys]atomic.Uint64
	var refused atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < perG; i++ {
				k := r.IntN(keys)
				tok := dlock.Token(1 + r.IntN(1000))
				for {
					old := maxOffered[k].Load()
					if uint64(tok) <= old || maxOffered[k].CompareAndSwap(old, uint64(tok)) {
						break
					}
				}
				s := st[k]
				err := m.Do(fmt.Sprint("key-", k), tok, func() error {
					if n := s.inside.Add(1); n != 1 {
						return fmt.Errorf("%d ops inside the fence of one key", n)
					}
					defer s.inside.Add(-1)
					if tok < s.last {
						return fmt.Errorf("accepted token %d after %d", tok, s.last)
					}
					s.last = tok
					s.accepted++
					return nil
				})
				if errors.Is(err, fence.ErrStale) {
					refused.Add(1)
					continue
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := int64(0)
	for k, s := range st {
		total += int64(s.accepted)
		if got, want := m.Highest(fmt.Sprint("key-", k)), dlock.Token(maxOffered[k].Load()); got != want {
			t.Errorf("key %d: Highest = %d, want the largest token offered, %d", k, got, want)
		}
	}
	if total+refused.Load() != goroutines*perG {
		t.Errorf("accepted %d + refused %d != %d operations", total, refused.Load(), goroutines*perG)
	}
	if refused.Load() == 0 {
		t.Error("no token was refused: the test exercised nothing")
	}
}
