package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// workerConfig is one worker's settings.
type workerConfig struct {
	common
	backend  string
	id       int
	ttl      time.Duration
	work     time.Duration
	unfenced bool
}

func (c *workerConfig) register(fs *flag.FlagSet) {
	c.common.register(fs)
	fs.StringVar(&c.backend, "backend", "file://", "dlock backend URL (cross-process: file://, redis://host:6379, ...)")
	fs.IntVar(&c.id, "id", 1, "this worker's number, recorded with its sales")
	fs.DurationVar(&c.ttl, "ttl", time.Second, "lock lease, renewed automatically while the worker runs")
	fs.DurationVar(&c.work, "work", 100*time.Millisecond, "time spent preparing each sale, between the read and the write")
	fs.BoolVar(&c.unfenced, "unfenced", false, "read and write without the fence (to see the oversell)")
}

func (c *workerConfig) args() []string {
	return []string{
		"-pg", c.pg, "-sku", c.sku, "-backend", c.backend, "-id", fmt.Sprint(c.id),
		"-ttl", c.ttl.String(), "-work", c.work.String(), fmt.Sprintf("-unfenced=%v", c.unfenced),
	}
}

func workerCmd(ctx context.Context, args []string, stdout io.Writer) error {
	var c workerConfig
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	c.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := positive("ttl", c.ttl); err != nil {
		return err
	}
	return worker(ctx, c, stdout)
}

// worker sells the SKU's stock one item at a time until it is gone. Each
// sale: take the lock, read the stock (fenced), prepare the sale for
// c.work, decrement the stock (fenced). It prints one line per event:
//
//	locked  worker=1 token=T
//	read    worker=1 token=T qty=Q
//	sold    worker=1 token=T
//	refused worker=1 token=T op=read|write err=...
//	lost    worker=1 token=T               (the lease ended before Unlock)
//	soldout worker=1
func worker(ctx context.Context, c workerConfig, out io.Writer) error {
	locker, err := dlock.Open(ctx, c.backend)
	if err != nil {
		return err
	}
	defer locker.Close()
	m, err := locker.NewMutex("stock/"+c.sku, dlock.WithTTL(c.ttl))
	if err != nil {
		return err
	}
	db, err := openDB(ctx, c.pg)
	if err != nil {
		return err
	}
	defer db.Close()
	emit := func(event string, format string, args ...any) {
		line := fmt.Sprintf("%-7s worker=%d "+format, append([]any{event, c.id}, args...)...)
		fmt.Fprintln(out, strings.TrimSpace(line))
	}

	for {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		tok := m.Token()
		emit("locked", "token=%d", tok)
		soldOut, err := sale(ctx, c, db, tok, emit)
		if uerr := m.Unlock(context.WithoutCancel(ctx)); errors.Is(uerr, dlock.ErrLockLost) {
			emit("lost", "token=%d", tok)
		} else if uerr != nil && err == nil {
			err = uerr
		}
		if err != nil {
			return err
		}
		if soldOut {
			emit("soldout", "")
			return nil
		}
	}
}

// sale is one turn under the lock. A refused token is reported and is not
// an error: the worker takes the lock again and looks at the stock anew.
func sale(ctx context.Context, c workerConfig, db *sql.DB, tok dlock.Token, emit func(string, string, ...any)) (soldOut bool, err error) {
	qty, err := readStock(ctx, db, c.sku, tok, c.unfenced)
	if errors.Is(err, fence.ErrStale) {
		emit("refused", "token=%d op=read err=%q", tok, err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	emit("read", "token=%d qty=%d", tok, qty)
	if qty <= 0 {
		return true, nil
	}

	// Prepare the sale (payment, packing slip...). A pause here, GC or
	// swap or SIGSTOP, can outlast the lease while another worker takes
	// the lock and sells. Checking Mutex.Lease().Valid() or Done() before
	// writing would narrow that window but never close it: the pause can
	// come right after the check. So this worker does not check, and
	// relies on the fence, which closes it. (The write does not use a
	// context tied to the lock for the same reason: the database, not the
	// lock, decides.)
	time.Sleep(c.work)

	err = sellOne(ctx, db, c.sku, c.id, tok, c.unfenced)
	if errors.Is(err, fence.ErrStale) {
		emit("refused", "token=%d op=write err=%q", tok, err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	emit("sold", "token=%d", tok)
	return false, nil
}
