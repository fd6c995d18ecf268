package dlockcron_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/dlock-go/dlock"
	dlockcron "github.com/dlock-go/dlock/cron"
	"github.com/robfig/cron/v3"
)

// Every instance of a program schedules the hourly report with Once as
// the last wrapper of its Cron's chain; the instance that wins an hour's
// key runs the report, the others skip. Here the store is a directory
// (file://, the instances of one host); a Redis or etcd URL spans hosts.
func ExampleOnce() {
	dir, err := os.MkdirTemp("", "locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	locker, err := dlock.Open(ctx, "file://"+dir)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	report := dlockcron.Job(func(ctx context.Context, t dlockcron.Tick) error {
		// Pass t.Token to what the report writes (package fence); ctx
		// ends if the hold is lost.
		fmt.Println("report written, fenced:", t.Token > 0)
		return nil
	})
	// 54 minutes: longer than the instances' schedules are apart, shorter
	// than the hour less a round trip's jitter.
	once := dlockcron.Once(locker, "reports/hourly", 54*time.Minute,
		dlockcron.OnSkip(func(key string) { fmt.Println("skipped:", key, "is held") }))
	c := cron.New(cron.WithChain(cron.Recover(cron.DefaultLogger), once))
	if _, err := c.AddJob("@hourly", report); err != nil {
		log.Fatal(err)
	}
	c.Start()
	defer c.Stop()

	// Two instances' runs of one hour's tick, called here directly: the
	// first wins the key; the key stays held for the minimum after the
	// report returns, so the second skips.
	once(report).Run()
	once(report).Run()
	// Output:
	// report written, fenced: true
	// skipped: reports/hourly is held
}
