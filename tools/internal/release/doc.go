// Package release checks dlock's modules as their users will see them:
// each module on its own (GOWORK=off), with no replace directive, taking
// its sibling modules (the other modules of go.work) at the versions its
// go.mod requires.
//
// Those versions are not published while they are being developed or
// tagged, so the package serves them itself: it writes a module proxy
// directory (<module path>/@v/{list,<v>.info,<v>.mod,<v>.zip}) that holds
// every module of the workspace, built from the working tree, at the
// versions the other modules require, and puts it first in GOPROXY as a
// file:// URL. Every other dependency comes from the usual proxy (after the
// local module cache, used as a proxy too so that nothing is downloaded
// twice). The go commands run with a private module cache, since the
// working tree is served under a version the shared cache may already hold
// with other contents, and with GONOSUMDB set for dlock's modules, whose
// local zips the checksum database does not know.
//
// go.sum files hold no lines for dlock's own modules: the hash of a module
// built from the working tree changes with every edit of that module, the
// workspace needs none, and a user's build never reads a dependency's
// go.sum. Tidy removes them and keeps every other line as go mod tidy
// writes it.
package release
