package faults

import (
	"time"

	"golang.org/x/sys/unix"
)

// Event kinds, as reported by workers and recorded by the resource.
const (
	EvReady   = "ready"   // the worker opened its Locker and Mutex; no check reads it
	EvAcquire = "acquire" // the worker's Lock returned; Token and Expires set
	EvRead    = "read"    // the resource accepted a read; Value is what was read
	EvWrite   = "write"   // the resource accepted a write of Value
	EvReject  = "reject"  // the resource rejected a read or write (stale token)
	EvRelease = "release" // Unlock returned nil
	EvLost    = "lost"    // Done closed before Unlock
	EvError   = "error"   // Lock or Unlock failed; Err says why
	EvHeld    = "held"    // a many-holds worker holds every key (Value: how many)
)

// Event is one step of a worker's history.
type Event struct {
	Worker  int    `json:"w"`
	Kind    string `json:"k"`
	Key     string `json:"s,omitempty"` // the permit's key, in a semaphore run
	Token   uint64 `json:"t,omitempty"`
	Mono    int64  `json:"m"`           // CLOCK_MONOTONIC, ns
	Expires int64  `json:"x,omitempty"` // validity deadline, CLOCK_MONOTONIC ns
	TTL     int64  `json:"l,omitempty"` // the hold's TTL, ns, in a many-holds run
	Value   int64  `json:"v,omitempty"`
	Err     string `json:"e,omitempty"`
}

// Mono reads CLOCK_MONOTONIC, which every process of the host shares (Go's
// own monotonic readings are relative to each process's start).
func Mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// MonoAt converts a time.Time with a monotonic reading (Lease().Expires)
// to CLOCK_MONOTONIC.
func MonoAt(t time.Time) int64 { return Mono() + int64(time.Until(t)) }
