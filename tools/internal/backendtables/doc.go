// Package backendtables holds the test that keeps the tables listing
// dlock's backends in agreement: the scheme-to-package table of Open,
// lockctl's imports and help text, the topologies, the launcher's kinds,
// the compose files, the fault matrix, install-deps, go.work, and the
// backend tables of README.md, CONTRIBUTING.md, docs/backends.md and
// docs/election.md. The truth they are held to is dlock.Schemes() with
// every backend imported, the backend packages that call dlock.Register,
// and topology.All(). docs/adding-a-backend.md is the checklist the test
// enforces. The package has no code of its own.
package backendtables
