package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// The election cases: leader election (dlock.Election) over the backend,
// with its terms as fencing tokens.

func mustElection(t testing.TB, l *dlock.Locker, name string, opts ...dlock.Option) *dlock.Election {
	t.Helper()
	e, err := l.NewElection(name, opts...)
	if err != nil {
		t.Fatalf("NewElection(%q): %v", name, err)
	}
	return e
}

// campaign runs e.Campaign in a goroutine; the channel gets its result.
func campaign(ctx context.Context, e *dlock.Election, value string) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.Campaign(ctx, value) }()
	return ch
}

// wantLeader fails unless the election's leader, asked through e, is value
// with term.
func wantLeader(t *testing.T, ctx context.Context, e *dlock.Election, value string, term dlock.Token) {
	t.Helper()
	got, err := e.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader: %v; want %q with term %d", err, value, term)
	}
	if got.Value != value || got.Token != term {
		t.Fatalf("Leader = %+v; want %q with term %d", got, value, term)
	}
}

// receive waits for the next value from an Observe channel.
func receive(t *testing.T, ch <-chan dlock.Leader, within time.Duration, what string) dlock.Leader {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the Observe channel closed", what)
		}
		return v
	case <-time.After(within):
		t.Fatalf("%s: nothing observed within %v", what, within)
	}
	panic("unreachable")
}

// ElectionOneLeader: candidates on several Lockers, each campaigning and
// resigning in turn: never two leaders at once, terms strictly increasing
// from leader to leader, Leader (from yet another Locker) naming the one
// that leads.
func (s *suite) electionOneLeader(t *testing.T) {
	const (
		candidates = 3
		rounds     = 3
	)
	name := s.key(t, "e")
	ctx := ctxFor(t, 3*time.Minute)
	watcher := mustElection(t, s.locker(t), name)
	var (
		inside   atomic.Int32
		overlaps atomic.Int32
		mu       sync.Mutex
		last     dlock.Token
		wg       sync.WaitGroup
	)
	errs := make(chan error, candidates*rounds)
	for i := range candidates {
		e := mustElection(t, s.locker(t), name, dlock.WithTTL(s.h.longTTL()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				value := fmt.Sprintf("candidate %d round %d", i, r)
				if err := e.Campaign(ctx, value); err != nil {
					errs <- fmt.Errorf("Campaign(%q): %w", value, err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				term := e.Token()
				mu.Lock()
				if term <= last {
					errs <- fmt.Errorf("%s: term %d is not greater than the previous leader's %d", value, term, last)
				}
				last = term
				mu.Unlock()
				if got, err := watcher.Leader(ctx); err != nil || got.Value != value || got.Token != term {
					errs <- fmt.Errorf("e.Leader() while %q (term %d) leads: %+v, %v", value, term, got, err)
				}
				if !e.Lease().Valid() || isClosed(e.Done()) {
					errs <- fmt.Errorf("%s: leading with Lease().Valid() = %v, Done closed = %v", value, e.Lease().Valid(), isClosed(e.Done()))
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				if err := e.Unlock(ctx); err != nil {
					errs <- fmt.Errorf("e.Unlock() by %q: %w", value, err)
					return
				}
				if e.Token() != 0 || !isClosed(e.Done()) || !errors.Is(e.Err(), dlock.ErrUnlocked) {
					errs <- fmt.Errorf("%s after Unlock: Token %d, Done closed %v, Err %v; want 0, closed, ErrUnlocked", value, e.Token(), isClosed(e.Done()), e.Err())
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("%d times two candidates led at once", n)
	}
	if _, err := watcher.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after every candidate resigned: %v; want ErrNoLeader", err)
	}
}

// ElectionBlocks: a second candidate's Campaign does not return while the
// first leads (renewed past its TTL), and returns once the first resigns,
// with a greater term.
func (s *suite) electionBlocks(t *testing.T) {
	name := s.key(t, "e")
	ttl := s.h.ttl()
	ctx := ctxFor(t, 2*time.Minute)
	a := mustElection(t, s.locker(t), name, dlock.WithTTL(ttl))
	b := mustElection(t, s.locker(t), name, dlock.WithTTL(ttl))
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	termA := a.Token()
	if termA == 0 {
		t.Fatal("leading with term 0")
	}
	if err := a.Campaign(ctx, "a again"); !errors.Is(err, dlock.ErrAlreadyHeld) {
		t.Fatalf("Campaign by the leader: %v; want ErrAlreadyHeld", err)
	}
	won := campaign(ctx, b, "b")
	// Two TTLs: without the renewals that keep a's leadership, its lease
	// would have ended.
	select {
	case err := <-won:
		t.Fatalf("second Campaign returned (%v) while the first candidate led", err)
	case <-time.After(2 * ttl):
	}
	if isClosed(a.Done()) || a.Token() != termA {
		t.Fatalf("leader renewed past its TTL: Done closed %v, term %d; want open, %d", isClosed(a.Done()), a.Token(), termA)
	}
	wantLeader(t, ctx, b, "a", termA)
	if err := a.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("second Campaign after the leader resigned: %v", err)
		}
	case <-time.After(slack):
		t.Fatal("second Campaign did not return after the leader resigned")
	}
	if b.Token() <= termA {
		t.Fatalf("new leader's term %d; want greater than %d", b.Token(), termA)
	}
	wantLeader(t, ctx, a, "b", b.Token())
	if err := a.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v; want ErrNotHeld", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// ElectionObserve: an observer that keeps up sees every leader, in order,
// with its value and strictly increasing terms; one that does not read
// ends up with the latest leader; the channel closes with its context and
// with its Locker's Close, and leaves no goroutine behind.
func (s *suite) electionObserve(t *testing.T) {
	name := s.key(t, "e")
	ctx := ctxFor(t, 3*time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	obs := mustElection(t, l3, name)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen, err := obs.Observe(octx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	lazy, err := obs.Observe(octx) // never read until the end
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	cands := []*dlock.Election{
		mustElection(t, l1, name, dlock.WithTTL(s.h.longTTL())),
		mustElection(t, l2, name, dlock.WithTTL(s.h.longTTL())),
	}
	var last dlock.Token
	for i := range 5 {
		e := cands[i%2]
		value := fmt.Sprintf("leader %d", i)
		if err := e.Campaign(ctx, value); err != nil {
			t.Fatalf("Campaign(%q): %v", value, err)
		}
		// Every leader, in order, ending with its term. (Redlock may first
		// show a leader caught while its acquire finishes with a lower
		// bound of its term; the value is the leader's all the same.)
		for {
			got := receive(t, seen, slack, value)
			if got.Value != value || got.Token > e.Token() {
				t.Fatalf("observed %+v; want %q with term %d (every leader, in order)", got, value, e.Token())
			}
			if got.Token <= last {
				t.Fatalf("observed term %d after %d; want strictly increasing", got.Token, last)
			}
			last = got.Token
			if got.Token == e.Token() {
				break
			}
		}
		if i == 4 {
			break // stays in office until the slow observer has seen it
		}
		if err := e.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
	}
	// The reader that never read ends up with the current leader.
	var lazyLast dlock.Token
	for {
		v := receive(t, lazy, slack, "the observer that did not read")
		if v.Token <= lazyLast {
			t.Fatalf("slow observer: term %d after %d; want strictly increasing", v.Token, lazyLast)
		}
		lazyLast = v.Token
		if v.Token == last {
			if v.Value != "leader 4" {
				t.Fatalf("slow observer's latest: %+v; want the last leader's value", v)
			}
			break
		}
	}
	if err := cands[0].Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	// Nothing more: a resignation is not a leader.
	select {
	case v := <-seen:
		t.Fatalf("observed %+v after the last leader resigned", v)
	case <-time.After(100 * time.Millisecond):
	}
	ocancel()
	for _, ch := range []<-chan dlock.Leader{seen, lazy} {
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("observed a leader after the context ended")
			}
		case <-time.After(slack):
			t.Fatal("Observe channel still open after its context ended")
		}
	}

	// Observe's goroutine ends with the Locker's Close.
	l4 := s.locker(t)
	ch, err := mustElection(t, l4, name).Observe(ctx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	if err := l4.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("observed a leader after Close with nobody leading")
		}
	case <-time.After(slack):
		t.Fatal("Observe channel still open after the Locker's Close")
	}
	if _, err := mustElection(t, l3, name).Observe(ctx); err != nil {
		t.Fatalf("Observe: %v", err)
	}

	// No goroutine left behind by an Observe whose context ended (after a
	// first one, so that lazily started client goroutines count in the
	// baseline).
	warm, cancel := context.WithCancel(ctx)
	ch, err = obs.Observe(warm)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	cancel()
	for range ch {
	}
	base := runtime.NumGoroutine()
	for range 3 {
		c, cancel := context.WithCancel(ctx)
		ch, err := obs.Observe(c)
		if err != nil {
			t.Fatalf("Observe: %v", err)
		}
		cancel()
		for range ch {
		}
	}
	waitGoroutines(t, base, "after Observe's context ended")
}

// ElectionReplaced: a leader whose Locker is closed without Unlock, a
// leader whose hold is lost (it stops renewing, as a crashed process
// would), and a leader whose hold is broken from outside are replaced by a
// waiting candidate with a greater term; the lost leader's Done is closed
// by the time the new leader's Campaign returns (the broken one's within
// its renewal interval).
func (s *suite) electionReplaced(t *testing.T) {
	name := s.key(t, "e")
	ttl := s.h.ttl()
	ctx := ctxFor(t, 2*time.Minute)
	lw := s.locker(t)
	watcher := mustElection(t, lw, name)

	// Closed without Unlock.
	la := s.locker(t)
	a := mustElection(t, la, name, dlock.WithTTL(ttl))
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	termA := a.Token()
	b := mustElection(t, s.locker(t), name, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	won := campaign(ctx, b, "b")
	if err := la.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isClosed(a.Done()) || !errors.Is(a.Err(), dlock.ErrClosed) {
		t.Fatalf("leader after its Locker's Close: Done closed %v, Err %v; want closed, ErrClosed", isClosed(a.Done()), a.Err())
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("Campaign after the leader's Locker closed: %v", err)
		}
	case <-time.After(ttl + s.h.ExpiryGrace + slack):
		t.Fatal("no new leader after the leader's Locker closed")
	}
	termB := b.Token()
	if termB <= termA {
		t.Fatalf("new leader's term %d; want greater than %d", termB, termA)
	}
	wantLeader(t, ctx, watcher, "b", termB)

	// b does not renew: its lease runs out, as a crashed leader's would,
	// and c, waiting, takes over.
	c := mustElection(t, s.locker(t), name, dlock.WithTTL(s.h.longTTL()))
	won = campaign(ctx, c, "c")
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("Campaign behind a leader that stopped renewing: %v", err)
		}
	case <-time.After(ttl + s.h.ExpiryGrace + slack):
		t.Fatal("no new leader after the leader's lease ran out")
	}
	if !isClosed(b.Done()) || !errors.Is(b.Err(), dlock.ErrLockLost) {
		t.Fatalf("lost leader when the next one won: Done closed %v, Err %v; want closed, ErrLockLost", isClosed(b.Done()), b.Err())
	}
	if b.Token() != 0 || b.Lease().Valid() {
		t.Fatalf("lost leader: Token %d, Lease valid %v; want 0, false", b.Token(), b.Lease().Valid())
	}
	if c.Token() <= termB {
		t.Fatalf("new leader's term %d; want greater than %d", c.Token(), termB)
	}
	wantLeader(t, ctx, watcher, "c", c.Token())
	if err := b.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock by the lost leader: %v; want ErrLockLost", err)
	}
	wantLeader(t, ctx, watcher, "c", c.Token()) // its Unlock took nothing from c

	// c's hold is broken from outside (Locker.Break, as "lockctl break"
	// does; on queue backends it leaves d queued): its Done closes, and d,
	// waiting, takes over.
	termC := c.Token()
	d := mustElection(t, s.locker(t), name, dlock.WithTTL(s.h.longTTL()))
	won = campaign(ctx, d, "d")
	if info, err := lw.Break(ctx, name); err != nil || !info.Held || info.Token != termC || info.Owner != "c" {
		t.Fatalf("Break: %+v, %v; want the leader's hold (term %d, value c)", info, err, termC)
	}
	select {
	case <-c.Done():
	case <-time.After(s.h.longTTL() + s.h.ExpiryGrace + slack):
		t.Fatal("broken leader's Done still open")
	}
	if !errors.Is(c.Err(), dlock.ErrLockLost) {
		t.Fatalf("broken leader's Err: %v; want ErrLockLost", c.Err())
	}
	select {
	case err := <-won:
		if err != nil {
			t.Fatalf("Campaign behind a broken leader: %v", err)
		}
	case <-time.After(s.h.longTTL() + s.h.ExpiryGrace + slack):
		t.Fatal("no new leader after the leader's hold was broken")
	}
	if d.Token() <= termC {
		t.Fatalf("new leader's term %d; want greater than the broken leader's %d", d.Token(), termC)
	}
	wantLeader(t, ctx, watcher, "d", d.Token())
	if err := d.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// ElectionFenced: a leader that stops (paused: no renewal, no action) past
// its lease is replaced, and when it resumes and acts with its term, the
// fence refuses it, because the new leader has used its greater term.
func (s *suite) electionFenced(t *testing.T) {
	name := s.key(t, "e")
	ttl := s.h.ttl()
	ctx := ctxFor(t, 2*time.Minute)
	var resource fence.Memory
	var writes []string
	write := func(who string, term dlock.Token) error {
		return resource.Do(name, term, func() error { writes = append(writes, who); return nil })
	}
	paused := mustElection(t, s.locker(t), name, dlock.WithTTL(ttl), dlock.WithAutoRenew(false))
	if err := paused.Campaign(ctx, "paused"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	stale := paused.Token()
	if err := write("paused", stale); err != nil {
		t.Fatalf("leader's write: %v", err)
	}
	next := mustElection(t, s.locker(t), name, dlock.WithTTL(s.h.longTTL()))
	if err := next.Campaign(ctx, "next"); err != nil {
		t.Fatalf("Campaign behind the paused leader: %v", err)
	}
	if err := write("next", next.Token()); err != nil {
		t.Fatalf("new leader's write: %v", err)
	}
	// The paused leader resumes: its own checks say it no longer leads, and
	// the fence refuses its term whatever it believes.
	if paused.Lease().Valid() || paused.Token() != 0 {
		t.Fatalf("paused leader after its replacement: Lease valid %v, Token %d; want false, 0", paused.Lease().Valid(), paused.Token())
	}
	err := write("paused, resumed", stale)
	var se *fence.StaleError
	if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) {
		t.Fatalf("paused leader's write with term %d after term %d: %v; want fence.ErrStale", stale, next.Token(), err)
	}
	if strings.Join(writes, ",") != "paused,next" {
		t.Fatalf("writes accepted: %v; want [paused next]", writes)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// ElectionErrors: bad input, misuse and Close are typed errors, and Close
// during Campaign returns promptly.
func (s *suite) electionErrors(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	l := s.locker(t)
	name := s.key(t, "e")
	if _, err := l.NewElection(""); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewElection with an empty name: %v; want ErrInvalidKey", err)
	}
	if _, err := l.NewElection(strings.Repeat("n", 4097)); !errors.Is(err, dlock.ErrInvalidKey) {
		t.Fatalf("NewElection with a 4097-byte name: %v; want ErrInvalidKey", err)
	}
	if _, err := l.NewElection(name, dlock.WithTTL(-time.Second)); !errors.Is(err, dlock.ErrInvalidOption) {
		t.Fatalf("NewElection WithTTL(-1s): %v; want ErrInvalidOption", err)
	}
	e := mustElection(t, l, name)
	if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader with nobody campaigning: %v; want ErrNoLeader", err)
	}
	if err := e.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock before any Campaign: %v; want ErrNotHeld", err)
	}
	if e.Token() != 0 || !isClosed(e.Done()) || e.Lease() != (dlock.Lease{}) {
		t.Fatal("before Campaign: want Token 0, Done closed, zero Lease")
	}
	for what, v := range map[string]string{
		"empty":         "",
		"1025 bytes":    strings.Repeat("v", 1025),
		"invalid UTF-8": "leader\xff",
	} {
		if err := e.Campaign(ctx, v); !errors.Is(err, dlock.ErrInvalidOption) {
			t.Fatalf("Campaign with a value %s: %v; want ErrInvalidOption", what, err)
		}
	}
	if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after refused Campaigns: %v; want ErrNoLeader", err)
	}
	// The longest value is stored whole.
	longest := strings.Repeat("ö", 512)
	leader := mustElection(t, s.locker(t), name, dlock.WithTTL(s.h.longTTL()))
	if err := leader.Campaign(ctx, longest); err != nil {
		t.Fatalf("Campaign with a 1024-byte value: %v", err)
	}
	if got, err := e.Leader(ctx); err != nil || got.Value != longest {
		t.Fatalf("Leader: value of %d bytes, %v; want the 1024 bytes whole", len(got.Value), err)
	}
	// A Campaign whose context ends leaves nothing behind.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := e.Campaign(short, "late")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign whose context ended: %v; want context.DeadlineExceeded", err)
	}
	if got, err := e.Leader(ctx); err != nil || got.Value != longest {
		t.Fatalf("Leader after a cancelled Campaign: %+v, %v", got, err)
	}
	// Close during Campaign returns promptly with ErrClosed.
	lc := s.locker(t)
	waiting := mustElection(t, lc, name)
	won := campaign(ctx, waiting, "waiting")
	time.Sleep(100 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- lc.Close() }()
	select {
	case err := <-won:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("Campaign when its Locker closed: %v; want ErrClosed", err)
		}
	case <-time.After(slack):
		t.Fatal("Campaign still waiting after its Locker's Close")
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := waiting.Campaign(ctx, "after"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Campaign on a closed Locker: %v; want ErrClosed", err)
	}
	if _, err := waiting.Observe(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Observe on a closed Locker: %v; want ErrClosed", err)
	}
	if _, err := waiting.Leader(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Leader on a closed Locker: %v; want ErrClosed", err)
	}
	if _, err := lc.NewElection(name); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("NewElection on a closed Locker: %v; want ErrClosed", err)
	}
	if err := leader.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

// ElectionObserveShort: an observer that keeps up is delivered every
// leader, in order, with its value and term, even a leader that resigns as
// soon as its Campaign returns (before the observer could look at who
// leads); an observer started afterwards is not delivered those earlier
// leaders, only the ones after it.
func (s *suite) electionObserveShort(t *testing.T) {
	name := s.key(t, "e")
	ctx := ctxFor(t, 3*time.Minute)
	l1, l2, l3 := s.locker(t), s.locker(t), s.locker(t)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	seen, err := mustElection(t, l3, name).Observe(octx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	cands := []*dlock.Election{
		mustElection(t, l1, name, dlock.WithTTL(s.h.longTTL())),
		mustElection(t, l2, name, dlock.WithTTL(s.h.longTTL())),
	}
	// expect receives leaders from ch until value's term, each with value
	// (Redlock may first show one with a lower bound of its term).
	var last dlock.Token
	expect := func(ch <-chan dlock.Leader, value string, term dlock.Token) {
		t.Helper()
		for {
			got := receive(t, ch, slack, value)
			if got.Value != value || got.Token > term {
				t.Fatalf("observed %+v; want %q with term %d (every leader, in order)", got, value, term)
			}
			if got.Token <= last {
				t.Fatalf("observed term %d after %d; want strictly increasing", got.Token, last)
			}
			last = got.Token
			if got.Token == term {
				return
			}
		}
	}
	for i := range 6 {
		e := cands[i%2]
		value := fmt.Sprintf("short leader %d", i)
		if err := e.Campaign(ctx, value); err != nil {
			t.Fatalf("Campaign(%q): %v", value, err)
		}
		term := e.Token()
		if err := e.Unlock(ctx); err != nil {
			t.Fatalf("Unlock: %v", err)
		}
		if term == 0 {
			t.Fatalf("%s: led with term 0", value)
		}
		expect(seen, value, term)
	}
	// A later observer: the leaders before it have all resigned, so it
	// is delivered nothing until the next leader, which it sees.
	late, err := mustElection(t, l3, name).Observe(octx)
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	select {
	case v := <-late:
		t.Fatalf("an observer started after every leader resigned was delivered %+v", v)
	case <-time.After(200 * time.Millisecond):
	}
	if err := cands[0].Campaign(ctx, "after"); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	term := cands[0].Token()
	if err := cands[0].Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	expect(seen, "after", term)
	last = 0
	expect(late, "after", term)
}
