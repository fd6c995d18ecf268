package sharedlease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeLease is one lease of fakeStore.
type fakeLease struct {
	id    int
	since time.Time
	ttl   time.Duration
	users int
	gone  bool
}

// fakeStore is a Store whose leases live in memory, on a clock the test
// moves by hand.
type fakeStore struct {
	mu  sync.Mutex
	now time.Time
	ttl time.Duration
	cur map[string]*fakeLease

	refreshErr  error  // what Refresh returns
	refreshGone bool   // Refresh finds the lease gone (Use refuses it)
	onRefresh   func() // if set, Refresh calls it first

	refreshes, grants, currents int
	busy, maxBusy               int           // Refresh and Replace calls in flight
	grantGate                   chan struct{} // if set, Replace waits on it
}

func newFakeStore() *fakeStore {
	return &fakeStore{now: time.Unix(1000, 0), ttl: 30 * time.Second, cur: map[string]*fakeLease{}}
}

func (f *fakeStore) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeStore) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeStore) enter() {
	f.mu.Lock()
	f.busy++
	f.maxBusy = max(f.maxBusy, f.busy)
	f.mu.Unlock()
}

func (f *fakeStore) leave() {
	f.mu.Lock()
	f.busy--
	f.mu.Unlock()
}

func (f *fakeStore) Current(key string) (*fakeLease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.currents++
	return f.cur[key], nil
}

func (f *fakeStore) Clock(l *fakeLease) (time.Time, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return l.since, l.ttl
}

func (f *fakeStore) Use(l *fakeLease) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.gone {
		return false
	}
	l.users++
	return true
}

func (f *fakeStore) Refresh(ctx context.Context, l *fakeLease) error {
	f.enter()
	defer f.leave()
	if f.onRefresh != nil {
		f.onRefresh()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes++
	if f.refreshGone {
		l.gone = true
		return nil
	}
	if f.refreshErr != nil {
		return f.refreshErr
	}
	l.since = f.now
	return nil
}

func (f *fakeStore) Replace(ctx context.Context, key string, old *fakeLease) (*fakeLease, error) {
	f.enter()
	defer f.leave()
	if f.grantGate != nil {
		<-f.grantGate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants++
	l := &fakeLease{id: f.grants, since: f.now, ttl: f.ttl, users: 1}
	f.cur[key] = l
	return l, nil
}

func newPool(f *fakeStore) *Pool[string, *fakeLease] {
	p := New[string, *fakeLease](f)
	p.now = f.clock
	return p
}

func mustGet(t *testing.T, p *Pool[string, *fakeLease]) *fakeLease {
	t.Helper()
	l, err := p.Get(context.Background(), "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return l
}

func TestGrantWhenNone(t *testing.T) {
	f := newFakeStore()
	p := newPool(f)
	l := mustGet(t, p)
	if l.id != 1 || f.grants != 1 || f.refreshes != 0 || l.users != 1 {
		t.Fatalf("got lease %d (users %d) after %d grants, %d refreshes; want lease 1 (users 1) after 1 grant, 0 refreshes",
			l.id, l.users, f.grants, f.refreshes)
	}
}

// The rule: a lease that has used less than a third of its TTL backs a
// new hold as it is; from a third on, it is renewed first.
func TestReuseBeforeAThird(t *testing.T) {
	f := newFakeStore()
	p := newPool(f)
	first := mustGet(t, p)

	f.advance(f.ttl/3 - time.Nanosecond)
	if l := mustGet(t, p); l != first || f.refreshes != 0 || f.grants != 1 || l.users != 2 {
		t.Fatalf("just before a third: lease %d, %d refreshes, %d grants, %d users; want lease 1 reused as is (0 refreshes, 1 grant, 2 users)",
			l.id, f.refreshes, f.grants, l.users)
	}

	f.advance(time.Nanosecond)
	if l := mustGet(t, p); l != first || f.refreshes != 1 || f.grants != 1 {
		t.Fatalf("at a third: lease %d, %d refreshes, %d grants; want lease 1 renewed once first", l.id, f.refreshes, f.grants)
	}
}

// The rule: a lease that has used a third but less than three quarters of
// its TTL is renewed and kept; from three quarters on, it is replaced
// without a renewal.
func TestRefreshBeforeThreeQuarters(t *testing.T) {
	f := newFakeStore()
	p := newPool(f)
	first := mustGet(t, p)

	f.advance(f.ttl*3/4 - time.Nanosecond)
	if l := mustGet(t, p); l != first || f.refreshes != 1 || f.grants != 1 || l.since != f.clock() {
		t.Fatalf("just before three quarters: lease %d, %d refreshes, %d grants; want lease 1 renewed (1 refresh, 1 grant)",
			l.id, f.refreshes, f.grants)
	}

	f.advance(f.ttl * 3 / 4) // three quarters since the renewal
	l := mustGet(t, p)
	if l == first || f.refreshes != 1 || f.grants != 2 {
		t.Fatalf("at three quarters: lease %d, %d refreshes, %d grants; want a new lease, no renewal (1 refresh, 2 grants)",
			l.id, f.refreshes, f.grants)
	}
	if f.cur["k"] != l {
		t.Fatalf("the new lease is not current")
	}
}

// A renewal that fails while the caller's context runs, or that finds the
// lease gone, leads to a new lease; one that fails with the caller's
// context ended ends Get with its error.
func TestRefreshFails(t *testing.T) {
	errBroken := errors.New("broken")
	for _, tc := range []struct {
		name      string
		err       error
		gone      bool
		cancelled bool
		wantErr   error
		wantGrant int
	}{
		{name: "error", err: errBroken, wantGrant: 2},
		{name: "gone", gone: true, wantGrant: 2},
		{name: "cancelled", err: context.Canceled, cancelled: true, wantErr: context.Canceled, wantGrant: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeStore()
			p := newPool(f)
			first := mustGet(t, p)
			f.advance(f.ttl / 2)
			f.refreshErr, f.refreshGone = tc.err, tc.gone
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelled {
				f.onRefresh = cancel // ctx ends during the renewal
			}
			l, err := p.Get(ctx, "k")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Get: %v, want %v", err, tc.wantErr)
			}
			if f.refreshes != 1 || f.grants != tc.wantGrant {
				t.Fatalf("%d refreshes, %d grants; want 1, %d", f.refreshes, f.grants, tc.wantGrant)
			}
			if err == nil && l == first {
				t.Fatalf("the failed lease was handed out")
			}
		})
	}
}

// The rule: one refresh or grant at a time, and callers that find no lease
// together get one new lease between them.
func TestOneGrantAtATime(t *testing.T) {
	const n = 16
	f := newFakeStore()
	f.grantGate = make(chan struct{})
	p := newPool(f)

	var wg sync.WaitGroup
	got := make([]*fakeLease, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = p.Get(context.Background(), "k")
		}()
	}
	// Let the grant that went first finish only once every caller has
	// looked for a current lease and found none: the first twice (before
	// and in its turn), each other once.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		c := f.currents
		f.mu.Unlock()
		if c >= n+1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(f.grantGate)
	wg.Wait()

	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Get %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("Get %d returned lease %d, Get 0 lease %d: want one lease for all", i, got[i].id, got[0].id)
		}
	}
	if f.grants != 1 || f.maxBusy != 1 || got[0].users != n {
		t.Fatalf("%d grants, %d at once, %d users; want 1 grant, 1 at once, %d users", f.grants, f.maxBusy, got[0].users, n)
	}
}

// Callers waiting for the turn give up when their context ends.
func TestTurnWaitCancelled(t *testing.T) {
	f := newFakeStore()
	p := newPool(f)
	p.turn <- struct{}{} // another caller's refresh or grant in flight
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get: %v, want context.Canceled", err)
	}
	if f.grants != 0 {
		t.Fatalf("%d grants without the turn", f.grants)
	}
}

// The rule: the sweep before a renewal takes exactly the holds whose own
// validity has ended, and forgets them.
func TestSweep(t *testing.T) {
	now := time.Unix(1000, 0)
	hs := Holds[string]{}
	hs.Track("ended", now.Add(-time.Second))
	hs.Track("ends now", now)
	hs.Track("runs", now.Add(time.Nanosecond))
	hs.Track("extended", now.Add(-time.Second))
	if !hs.Extend("extended", now.Add(time.Second)) {
		t.Fatalf("Extend of a tracked hold reported false")
	}

	got := map[string]bool{}
	for _, h := range hs.Expired(now) {
		got[h] = true
	}
	if len(got) != 2 || !got["ended"] || !got["ends now"] {
		t.Fatalf("swept %v, want [ended, ends now]", got)
	}
	if _, ok := hs.Validity("ended"); ok {
		t.Fatalf("a swept hold is still tracked")
	}
	if hs.Extend("ended", now.Add(time.Hour)) {
		t.Fatalf("Extend of a swept hold reported true")
	}
	if until, ok := hs.Validity("runs"); !ok || !until.Equal(now.Add(time.Nanosecond)) {
		t.Fatalf("Validity(runs) = %v, %v", until, ok)
	}
	if len(hs.Expired(now)) != 0 {
		t.Fatalf("a second sweep at the same instant took more holds")
	}
	if !hs.Untrack("runs") || hs.Untrack("runs") {
		t.Fatalf("Untrack reports whether the hold was tracked")
	}
	var none Holds[string]
	if len(none.Expired(now)) != 0 || none.Untrack("x") {
		t.Fatalf("a nil Holds is not empty")
	}
}
