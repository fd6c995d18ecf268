// Package linkcheck checks what a program that imports part of dlock
// links: a Redis-only program must not carry go-redis's Cluster and
// failover clients, which the redis+cluster and redis+sentinel schemes
// need (they are a third of such a program's size).
package linkcheck
