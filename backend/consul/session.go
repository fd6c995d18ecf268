package consul

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// sessionName is the Name of every session this package creates, so that
// an operator can tell them apart in the Consul UI.
const sessionName = "dlock"

// maxIdleSessions bounds the idle sessions a driver keeps per TTL.
const maxIdleSessions = 32

// session is one Consul session: TTL only (no health checks, so only its
// TTL or an explicit destroy ends it), behavior=delete (its lock keys are
// deleted when it ends), and the driver's lock-delay. A session of its own
// serves at most one hold at a time and waits in the pool between holds; a
// shared session (see sharedSessions) backs many holds at once.
type session struct {
	id     string
	want   time.Duration // the TTL asked for: the pool or shared bucket
	ttl    time.Duration // as granted by the server
	shared bool

	mu    sync.Mutex
	since time.Time // when the create or the last successful renew was sent
	hold  *hold     // own session: the hold it backs, nil while idle

	// Shared sessions only; guarded by mu.
	refs  int                 // holds on it plus acquires in flight with it
	holds map[*hold]time.Time // each hold's own validity end (see sweep)
	dead  bool                // found gone on the server
}

// bind records that s backs h.
func (s *session) bind(h *hold) {
	s.mu.Lock()
	s.hold = h
	s.mu.Unlock()
}

// unbind ends h's use of s. It reports false if s backs another hold (or
// none): then h must leave s alone.
func (s *session) unbind(h *hold) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != h {
		return false
	}
	s.hold = nil
	return true
}

// state returns when the session's TTL began to run and how long it runs.
func (s *session) state() (since time.Time, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since, s.ttl
}

func (s *session) renewed(sent time.Time, ttl time.Duration) {
	s.mu.Lock()
	if sent.After(s.since) {
		s.since = sent
	}
	if ttl > 0 {
		s.ttl = ttl
	}
	s.mu.Unlock()
}

// reusable reports whether s is young enough to back a new hold: its TTL
// runs from its last renewal, so a new hold on it gets a validity window
// of at least three quarters of the TTL.
func (s *session) reusable(now time.Time) bool {
	since, ttl := s.state()
	return now.Sub(since) < ttl/4
}

func (d *consulDriver) wopts(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

func (d *consulDriver) qopts(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{}).WithContext(ctx)
}

// createSession makes a new session with the given TTL.
func (d *consulDriver) createSession(ctx context.Context, ttl time.Duration) (*session, error) {
	body := map[string]any{
		"Name":       sessionName,
		"TTL":        ttl.String(),
		"Behavior":   api.SessionBehaviorDelete,
		"LockDelay":  d.lockDelay.String(),
		"NodeChecks": []string{}, // TTL only: no serfHealth check
	}
	var out struct{ ID string }
	sent := time.Now()
	if _, err := d.c.Raw().Write("/v1/session/create", body, &out, d.wopts(ctx)); err != nil {
		return nil, mapErr(ctx, "create session", err)
	}
	return &session{id: out.ID, want: ttl, ttl: ttl, since: sent}, nil
}

// renewSession renews s and returns the TTL the server granted. ok is false
// when the session no longer exists.
func (d *consulDriver) renewSession(ctx context.Context, s *session) (ttl time.Duration, ok bool, err error) {
	sent := time.Now()
	entry, _, err := d.c.Session().Renew(s.id, d.wopts(ctx))
	if err != nil {
		return 0, false, mapErr(ctx, "renew session", err)
	}
	if entry == nil {
		return 0, false, nil
	}
	_, ttl = s.state()
	if t, perr := time.ParseDuration(entry.TTL); perr == nil && t > 0 {
		ttl = t
	}
	s.renewed(sent, ttl)
	return ttl, true, nil
}

// destroyLater destroys s in the background: nothing waits on it, and Close
// waits for it.
func (d *consulDriver) destroyLater(s *session) {
	d.background(func(ctx context.Context) {
		_, _ = d.c.Session().Destroy(s.id, d.wopts(ctx))
	})
}

// pool keeps sessions between holds, so that a new hold usually costs one
// round trip (the acquire transaction) instead of two.
type pool struct {
	d      *consulDriver
	mu     sync.Mutex
	closed bool
	idle   map[time.Duration][]idleSession // by requested TTL, newest last
}

type idleSession struct {
	s     *session
	timer *time.Timer // destroys s when it is too old to reuse
}

// get returns an idle session for ttl young enough to reuse, or nil.
func (p *pool) get(ttl time.Duration) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for l := p.idle[ttl]; len(l) > 0; l = p.idle[ttl] {
		is := l[len(l)-1]
		p.idle[ttl] = l[:len(l)-1]
		is.timer.Stop()
		if is.s.reusable(now) {
			return is.s
		}
		p.d.destroyLater(is.s)
	}
	return nil
}

// put returns s, which holds no lock, to the pool, or destroys it if the
// pool is full or closed or s is too old.
func (p *pool) put(ttl time.Duration, s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	since, sttl := s.state()
	age := time.Since(since)
	if p.closed || len(p.idle[ttl]) >= maxIdleSessions || age >= sttl/4 {
		p.d.destroyLater(s)
		return
	}
	is := idleSession{s: s}
	is.timer = time.AfterFunc(sttl/4-age, func() { p.expire(ttl, s) })
	p.idle[ttl] = append(p.idle[ttl], is)
}

// expire drops s from the pool, if it is still there, and destroys it.
func (p *pool) expire(ttl time.Duration, s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.idle[ttl]
	for i := range l {
		if l[i].s == s {
			p.idle[ttl] = append(l[:i:i], l[i+1:]...)
			if len(p.idle[ttl]) == 0 {
				delete(p.idle, ttl)
			}
			p.d.destroyLater(s)
			return
		}
	}
}

// close destroys every idle session; later puts destroy at once.
func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for ttl, l := range p.idle {
		for _, is := range l {
			is.timer.Stop()
			p.d.destroyLater(is.s)
		}
		delete(p.idle, ttl)
	}
}
