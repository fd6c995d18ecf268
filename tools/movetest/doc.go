// Package movetest runs the tests of a move between backends (the move:
// URL scheme, docs/moving.md) on real servers: tokens across every
// configuration, loss on either store, and the conformance suite on the
// move's first configuration. They live in the tools module, which
// requires every backend.
package movetest
