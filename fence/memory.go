package fence

import (
	"sync"

	"github.com/dlock-go/dlock"
)

// Memory fences resources that live in this process: a Go service that owns
// the resource (a map, a file, a connection) and receives requests from
// lock holders elsewhere, each carrying its token.
//
// The zero Memory is ready to use and safe for concurrent use. It keeps the
// highest token of every resource key it has seen, forever: forgetting one
// would let a stale holder through. Its memory therefore grows with the
// number of distinct keys.
type Memory struct {
	mu   sync.Mutex
	keys map[string]*memFence
}

type memFence struct {
	mu      sync.Mutex // held across the check and the operation
	highest dlock.Token
}

func (m *Memory) fence(resource string) *memFence {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string]*memFence{}
	}
	f := m.keys[resource]
	if f == nil {
		f = &memFence{}
		m.keys[resource] = f
	}
	return f
}

// Do runs op if token is accepted for resource (see Rule), holding the
// resource's fence for the whole of op, so that no operation with another
// token can pass the fence between the check and op's effect. Operations on
// different resources run in parallel.
//
// The fence is raised to token before op runs and stays raised whatever op
// returns: the token has been seen. Do returns op's error, or the fence's
// error (ErrNoToken, ErrStale) without running op.
func (m *Memory) Do(resource string, token dlock.Token, op func() error) error {
	if err := CheckArgs(resource, token); err != nil {
		return err
	}
	f := m.fence(resource)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := (Rule{Resource: resource, Highest: f.highest}).Check(token); err != nil {
		return err
	}
	f.highest = token
	return op()
}

// Check applies the rule and raises the fence, without an operation. It is
// enough when the operation's effect is itself recorded under the same
// fence later, but checking and then acting as two steps is racy: a newer
// holder can pass between them. Prefer Do.
func (m *Memory) Check(resource string, token dlock.Token) error {
	return m.Do(resource, token, func() error { return nil })
}

// Highest returns the highest token seen for resource, 0 if none.
func (m *Memory) Highest(resource string) dlock.Token {
	m.mu.Lock()
	f := m.keys[resource]
	m.mu.Unlock()
	if f == nil {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.highest
}
