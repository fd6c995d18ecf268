package driver

import "context"

// TokenCeiling is implemented by drivers that can bound the fencing tokens
// their store has issued. A move from one store to another (the "move"
// scheme, docs/moving.md) reads it from the old store when the move is
// committed, so that the new store's tokens can be lifted above every
// token the old one ever issued.
type TokenCeiling interface {
	// TokenCeiling returns an upper bound on every token the store has
	// issued so far, for any key: no hold granted before the call
	// returned has a greater token. Tokens issued after the call may
	// exceed it; the caller adds headroom for those.
	TokenCeiling(ctx context.Context) (uint64, error)
}
