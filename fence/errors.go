package fence

import (
	"errors"
	"fmt"

	"github.com/dlock-go/dlock"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrStale: the operation's token is below the highest token already
	// seen for the resource; a newer holder has taken over. The error is a
	// *StaleError carrying both numbers.
	ErrStale = errors.New("fence: stale token")
	// ErrNoToken: the token is 0, which no backend ever issues. It means the
	// caller holds no lock (Mutex.Token of an unlocked Mutex) and must not
	// touch the resource.
	ErrNoToken = errors.New("fence: token 0: no lock held")
	// ErrTokenRange: the token does not fit the store. PostgreSQL's bigint
	// holds tokens up to 2^63-1 (math.MaxInt64); larger ones are refused
	// rather than wrapped to negative numbers.
	ErrTokenRange = errors.New("fence: token out of range")
	// ErrNotFound: a fenced read or update found no value or row for the
	// resource. The fence itself was raised (or was already high enough):
	// the token was accepted, there was just nothing there.
	ErrNotFound = errors.New("fence: resource not found")
	// ErrInvalid: bad arguments (an empty resource key, an empty SQL
	// identifier, a nil client).
	ErrInvalid = errors.New("fence: invalid argument")
)

// StaleError reports a rejected token. It matches ErrStale.
type StaleError struct {
	// Resource is the key of the fenced resource.
	Resource string
	// Token is the token the operation carried.
	Token dlock.Token
	// Highest is the highest token seen for Resource when the operation
	// was rejected (always > Token).
	Highest dlock.Token
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("fence: stale token %d for resource %q: a newer holder has token %d",
		e.Token, e.Resource, e.Highest)
}

// Unwrap makes errors.Is(err, ErrStale) true.
func (e *StaleError) Unwrap() error { return ErrStale }

func noToken(resource string) error {
	return fmt.Errorf("%w (resource %q): take the lock first and pass Mutex.Token()", ErrNoToken, resource)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
