package conformance

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlock-go/dlock/observe"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// lossCutHolds is how many holds LossCutOff takes on its one Locker: more
// than the renewal workers a Locker runs, so that renewal calls to a
// stalled store queue behind one another.
const lossCutHolds = 1000

// LossCutOff: many holds on one Locker whose store stops answering (a
// partition, a paused server): every hold's Done closes before its
// Expires plus the drift allowance, however many renewal calls the
// stalled store keeps in flight. The instant each hold's end is reported
// (just before its Done closes) is taken by an Observer, so that a test
// goroutine that runs late on a loaded machine cannot hide nor fake a late
// Done.
func (s *suite) lossCutOff(t *testing.T) {
	ctx := ctxFor(t, 5*time.Minute)
	// The loss margin is a tenth of the TTL: 400 ms and more, ample for a
	// loaded machine.
	ttl := max(s.h.ttl(), 4*time.Second)
	if s.h.MaxTTL > 0 {
		ttl = min(ttl, s.h.MaxTTL)
	}
	// Forty TTLs, up to 1.4 times the shortest, where the backend takes
	// more than one: each TTL renews on a grid of its own, so that the
	// renewals of the holds fall due apart and take many calls, as in a
	// program whose holds have several TTLs.
	holdTTL := func(i int) time.Duration {
		d := ttl + ttl*time.Duration(i%40)/100
		if s.h.MaxTTL > 0 {
			d = min(d, s.h.MaxTTL)
		}
		return d
	}
	clock := newLossClock()
	l, link, err := s.h.CutOff(t, ctx, dlock.WithObserver(clock))
	if err != nil {
		t.Fatalf("CutOff: %v", err)
	}
	t.Cleanup(func() {
		link.Heal()
		_ = l.Close()
	})

	ms := make([]*dlock.Mutex, lossCutHolds)
	var (
		next   atomic.Int64
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(ms) {
					return
				}
				m, err := l.NewMutex(s.key(t, strconv.Itoa(i)), dlock.WithTTL(holdTTL(i)))
				if err == nil {
					// Through the proxies, on a loaded machine, a quorum
					// backend's short per-server timeout may pass before
					// the cut: the cut is what is under test.
					for try := 0; ; try++ {
						err = m.Lock(ctx)
						if err == nil || !errors.Is(err, dlock.ErrUnavailable) || try == 5 {
							break
						}
					}
				}
				if err != nil {
					err = fmt.Errorf("locking key %d of %d: %w", i, len(ms), err)
					failed.CompareAndSwap(nil, &err)
					return
				}
				ms[i] = m
			}
		}()
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		t.Fatal(*err)
	}

	link.Cut()
	type held struct {
		m       *dlock.Mutex
		done    <-chan struct{}
		expires time.Time // Expires plus drift, as last seen
	}
	hs := make([]held, 0, len(ms))
	var before []string
	for _, m := range ms {
		lease := m.Lease()
		if lease.Token == 0 {
			// Ended before the cut: no window to time its end against.
			before = append(before, fmt.Sprintf("%s (%v)", m.Key(), m.Err()))
			continue
		}
		hs = append(hs, held{m: m, done: m.Done(), expires: lease.Expires.Add(driver.DriftAllowance(lease.TTL))})
	}
	if len(before) > 0 {
		t.Fatalf("%d of %d holds had ended before the store was cut off: %s",
			len(before), len(ms), strings.Join(before[:min(len(before), 5)], ", "))
	}
	var (
		late    []string
		waitFor = time.Now().Add(2*holdTTL(39) + slack)
	)
	for _, h := range hs {
		select {
		case <-h.done:
		case <-time.After(time.Until(waitFor)):
			t.Fatalf("%s: Done still open two TTLs after the cut", h.m.Key())
		}
		ended, renewed := clock.at(h.m.Key())
		// A renewal that a majority answered just before the cut may have
		// moved the window on since it was read.
		deadline := h.expires
		if !renewed.IsZero() && renewed.After(deadline) {
			deadline = renewed
		}
		if ended.IsZero() {
			t.Fatalf("%s: Done closed, but no end of the hold was reported", h.m.Key())
		}
		if !ended.Before(deadline) {
			late = append(late, fmt.Sprintf("%s (%v after Expires plus drift)", h.m.Key(), ended.Sub(deadline).Round(time.Millisecond)))
		}
		if h.m.Lease().Valid() || !errors.Is(h.m.Err(), dlock.ErrLockLost) {
			t.Fatalf("%s: Lease().Valid() = %v, Err() = %v after the cut; want the hold lost", h.m.Key(), h.m.Lease().Valid(), h.m.Err())
		}
	}
	if len(late) > 0 {
		t.Fatalf("%d of %d holds closed Done after Expires plus drift, the store cut off: %s",
			len(late), len(hs), strings.Join(late[:min(len(late), 5)], ", "))
	}
}

// lossClock is an Observer that notes when each hold's end was reported
// (just before its Done closes) and the latest validity window a renewal
// gave it, each at the moment the Locker knew it: the check does not
// depend on when the test's own goroutine gets to run.
type lossClock struct {
	mu      sync.Mutex
	ended   map[string]time.Time
	renewed map[string]time.Time // Expires plus drift
}

func newLossClock() *lossClock {
	return &lossClock{ended: map[string]time.Time{}, renewed: map[string]time.Time{}}
}

func (c *lossClock) at(key string) (ended, renewed time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ended[key], c.renewed[key]
}

func (c *lossClock) Begin(ctx context.Context, _ observe.Call) context.Context { return ctx }

func (c *lossClock) Step(context.Context, observe.Call, observe.Step) {}

func (c *lossClock) End(_ context.Context, call observe.Call, r observe.Result) {
	if call.Op != observe.OpRenew || r.Err != nil || r.Expires.IsZero() {
		return
	}
	exp := r.Expires.Add(driver.DriftAllowance(r.TTL))
	c.mu.Lock()
	if exp.After(c.renewed[call.Key]) {
		c.renewed[call.Key] = exp
	}
	c.mu.Unlock()
}

func (c *lossClock) HoldEnd(e observe.HoldEnd) {
	now := time.Now()
	c.mu.Lock()
	if _, ok := c.ended[e.Key]; !ok {
		c.ended[e.Key] = now
	}
	c.mu.Unlock()
}
