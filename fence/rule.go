package fence

import (
	"fmt"
	"strconv"

	"github.com/dlock-go/dlock"
)

// Rule is the fencing rule for one resource, stated once: an operation
// carrying token on Resource is accepted iff token >= Highest, the highest
// token seen for Resource so far; when accepted, the caller raises Highest
// to token.
//
//	err := fence.Rule{Resource: "stock/apple", Highest: seen}.Check(token)
//
// Every checker in this package applies exactly this rule, in Go (Memory,
// Dir) or inside one statement of its store (SQL, Lua, an etcd
// transaction). Use Rule directly only where the check and the raise are
// already atomic (under a lock of your own, inside a transaction).
type Rule struct {
	// Resource is the key of the fenced resource, for the error.
	Resource string
	// Highest is the highest token seen for Resource, 0 if none.
	Highest dlock.Token
}

// Check returns nil when an operation carrying token may proceed, an
// ErrNoToken error for token 0, and a *StaleError (matching ErrStale) when
// token < r.Highest. It changes nothing: raising Highest is the caller's.
func (r Rule) Check(token dlock.Token) error {
	if token == 0 {
		return noToken(r.Resource)
	}
	if token < r.Highest {
		return &StaleError{Resource: r.Resource, Token: token, Highest: r.Highest}
	}
	return nil
}

// tokenWidth is the number of decimal digits of the largest uint64
// (18446744073709551615). Tokens stored as text are zero-padded to this
// width so that comparing them as bytes (etcd) or digit by digit (Lua)
// orders them as numbers.
const tokenWidth = 20

// EncodeToken returns t as a 20-digit zero-padded decimal string, the form
// in which the Redis and etcd checkers store fences. Byte order of encoded
// tokens is numeric order, which is what etcd's value comparisons need.
func EncodeToken(t dlock.Token) string {
	return fmt.Sprintf("%0*d", tokenWidth, uint64(t))
}

// DecodeToken parses a token written by EncodeToken (or any decimal
// representation of a uint64).
func DecodeToken(s string) (dlock.Token, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fence: stored fence %q is not a token: %w", s, err)
	}
	return dlock.Token(v), nil
}

// CheckResource rejects an empty resource key (an ErrInvalid error): it
// would fence everything and nothing. Checkers call it first.
func CheckResource(resource string) error {
	if resource == "" {
		return invalid("empty resource key")
	}
	return nil
}

// CheckArgs is what every checker checks before it touches its store: a
// non-empty resource key (ErrInvalid) and a token other than 0
// (ErrNoToken). The store-specific checkers (package redisfence beside the
// Redis backend, package etcdfence in the etcd module) and checkers of
// your own call it, so that bad arguments fail alike everywhere.
func CheckArgs(resource string, token dlock.Token) error {
	if err := CheckResource(resource); err != nil {
		return err
	}
	if token == 0 {
		return noToken(resource)
	}
	return nil
}
