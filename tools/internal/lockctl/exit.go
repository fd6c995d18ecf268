package lockctl

import (
	"errors"
	"fmt"
	"io"

	"github.com/dlock-go/dlock"
)

// Exit statuses of lockctl's own outcomes. The values follow sysexits(3)
// where one fits (64 EX_USAGE, 69 EX_UNAVAILABLE, 75 EX_TEMPFAIL), so that
// cron wrappers treat "not acquired" as "try again later".
const (
	ExitUsage       = 64  // bad flag, key, TTL or URL
	ExitBackend     = 69  // the backend could not be reached or failed
	ExitNotAcquired = 75  // held elsewhere; --wait ran out or was 0
	ExitLockLost    = 76  // the lock was lost while the command ran
	ExitCannotExec  = 126 // the command exists but could not be executed
	ExitNotFound    = 127 // the command was not found
	exitSignalBase  = 128 // 128+N: the command (or lockctl's wait) ended by signal N
)

// usageError prints one line and returns ExitUsage.
func usageError(w io.Writer, format string, args ...any) int {
	fmt.Fprintf(w, "lockctl: "+format+"\n", args...)
	return ExitUsage
}

// errorCode maps a dlock error to lockctl's exit status: a bad URL, key or
// option is a usage error, anything else a backend error.
func errorCode(err error) int {
	switch {
	case errors.Is(err, dlock.ErrInvalidURL), errors.Is(err, dlock.ErrInvalidKey), errors.Is(err, dlock.ErrInvalidOption):
		return ExitUsage
	case errors.Is(err, dlock.ErrNotAcquired):
		return ExitNotAcquired
	case errors.Is(err, dlock.ErrLockLost):
		return ExitLockLost
	default:
		return ExitBackend
	}
}

// fail prints err as one line and returns its exit status.
func fail(w io.Writer, err error) int {
	fmt.Fprintf(w, "lockctl: %v\n", err)
	return errorCode(err)
}
