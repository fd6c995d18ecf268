// Command lockctl runs a command under a distributed lock, shows the race
// a lock prevents, and compares lock backends.
//
//	lockctl run [flags] KEY -- COMMAND [ARGS...]   like flock(1), on every backend
//	lockctl demo [flags]                           the stock-oversell race, without and with a lock
//	lockctl bench --backend URL [--backend URL ...] [--html FILE] [--json]
//
// Run `lockctl --help` and `lockctl COMMAND --help` for the flags, the
// backend URLs and the exit statuses. The backend is --backend, else
// $DLOCK_URL, else file:// (locks shared by the processes of one host, with
// no server). Every backend of dlock is built in.
package main

import (
	"context"
	"os"

	"github.com/dlock-go/dlock/internal/lockctl"
)

func main() {
	os.Exit(lockctl.Main(context.Background(), os.Args[1:], lockctl.OSIO()))
}
