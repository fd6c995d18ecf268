// Package move is the driver behind dlock's "move" URL scheme: the
// configurations a fleet runs through while it moves from one store (X)
// to another (Y) with rolling restarts (docs/moving.md).
//
//   - C1, move:?from=X&to=Y: every hold is taken on X, then on Y (that
//     order, always), and released on Y, then X. Its validity window is
//     the shorter of the two; it is lost when either is lost.
//   - Commit (Commit, lockctl move commit) writes on Y a record holding
//     a ceiling of every token X has issued, once no instance runs
//     without C1.
//   - C2, move:?to=Y: Y alone; it refuses to open without the commit.
//
// Tokens: before the commit a C1 hold presents X's token, as a plain X
// client does. From the commit on, a hold presents Y's token plus a base
// recorded on Y for its key, written once by the first holder of the key
// that needs it: X's token + 1 - Y's token by a C1 hold (so that it
// presents X's token + 1), the commit's ceiling by a C2 hold. Every
// token presented for a key is then strictly greater than every earlier
// one (docs/moving.md has the argument).
package move
