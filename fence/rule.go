package fence

import (
	"fmt"
	"strconv"

	"github.com/dlock-go/dlock"
)

// Check is the fencing rule, stated once: an operation carrying token on
// resource is accepted iff token >= highest, the highest token seen for
// resource so far; when accepted, the caller raises highest to token.
//
// It returns nil when the operation may proceed, an ErrNoToken error for
// token 0, and a *StaleError (matching ErrStale) when token < highest.
// Every checker in this package applies exactly this rule, in Go (Memory) or
// inside one statement of its store (SQL, Lua, an etcd transaction). Use
// Check directly only where the check and the raise are already atomic
// (under a lock of your own, inside a transaction).
func Check(resource string, highest, token dlock.Token) error {
	if token == 0 {
		return noToken(resource)
	}
	if token < highest {
		return &StaleError{Resource: resource, Token: token, Highest: highest}
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
