// Command stock is the stock decrement done right: a lock from any dlock
// backend, the stock row in PostgreSQL, and every read and write of the row
// fenced with the lock's token (package fence), so that a worker paused past
// its lease cannot sell an item that is gone.
//
// Usage:
//
//	stock demo   [flags]   run workers as processes, pause one with SIGSTOP, report
//	stock worker [flags]   one worker: lock, fenced read, work, fenced decrement; until sold out
//	stock setup  [flags]   create the tables and set the stock of a SKU
//	stock report [flags]   print the stock and the sales of a SKU
//
// Run "stock COMMAND -h" for the flags. The demo exits with status 1 when the
// stock was oversold (it is, on purpose, with -unfenced).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/memory"
	_ "github.com/dlock-go/dlock/backend/redis"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// defaultPG is the database of the repository's postgres test topology.
const defaultPG = "postgres://dlock:dlock@127.0.0.1:5433/dlock?sslmode=disable"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errOversold is the demo's verdict when sales exceed the stock.
var errOversold = errors.New("oversold")

// run is the command line: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "demo":
		err = demoCmd(ctx, args[1:], stdout, stderr)
	case "worker":
		err = workerCmd(ctx, args[1:], stdout)
	case "setup":
		err = setupCmd(ctx, args[1:], stdout)
	case "report":
		err = reportCmd(ctx, args[1:], stdout)
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "stock: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "stock:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "stock:", err)
		return 1
	}
}

var errUsage = errors.New("usage")

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: stock COMMAND [flags]

  demo     run workers as processes, pause one with SIGSTOP past its lease, report
  worker   one worker: lock, fenced read, work, fenced decrement; until sold out
  setup    create the tables and set the stock of a SKU
  report   print the stock and the sales of a SKU

"stock COMMAND -h" lists a command's flags.
`)
}

// common are the flags every command has.
type common struct {
	pg  string
	sku string
}

func (c *common) register(fs *flag.FlagSet) {
	pg := os.Getenv("DLOCK_POSTGRES_URL")
	if pg == "" {
		pg = defaultPG
	}
	fs.StringVar(&c.pg, "pg", pg, "PostgreSQL URL (default: $DLOCK_POSTGRES_URL, else the test topology's)")
	fs.StringVar(&c.sku, "sku", "widget", "the product whose stock is sold")
}

// parse parses args, turning flag errors into errUsage.
func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: -%s must be positive, got %v", errUsage, name, d)
	}
	return nil
}
