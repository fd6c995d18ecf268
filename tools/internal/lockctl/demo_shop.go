package lockctl

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
)

// shop is the demo's shared stock: a counter that workers read, and later
// write back minus one, as a web shop's handlers do with a database row.
type shop interface {
	read() (int, error)
	write(n int) error
}

// memShop is the stock shared by goroutines. Its reads and writes are each
// atomic, so Go sees no data race; the race it shows is the one between a
// read and the write that follows it, which no atomic counter fixes.
type memShop struct{ v atomic.Int64 }

func (s *memShop) read() (int, error) { return int(s.v.Load()), nil }
func (s *memShop) write(n int) error  { s.v.Store(int64(n)); return nil }

// fileShop is the stock shared by processes: a number in a file, written
// in place with a fixed width so that a reader never sees a half-written
// (truncated) file.
type fileShop struct{ path string }

const stockWidth = 20

func (s fileShop) read() (int, error) {
	b, err := os.ReadFile(s.path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("stock file %s: %q: %w", s.path, b, err)
	}
	return n, nil
}

func (s fileShop) write(n int) error {
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(f, "%-*d\n", stockWidth, n); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// order is one sale a worker recorded.
type order struct {
	Worker int    `json:"worker"`
	Seen   int    `json:"stock_seen"` // the stock the worker read before selling
	Token  uint64 `json:"token,omitempty"`
}

// sell is one worker: until the stock is empty, it reads the stock, pauses
// (a payment, a slow query), writes the stock back minus one and records
// the order. With m non-nil, each round runs under the lock.
func sell(ctx context.Context, worker int, s shop, m *dlock.Mutex, pause time.Duration, record func(order) error) error {
	for {
		if m != nil {
			if err := m.Lock(ctx); err != nil {
				return err
			}
		}
		done, err := sellOne(worker, s, m, pause, record)
		if m != nil {
			if uerr := m.Unlock(ctx); uerr != nil && err == nil {
				err = uerr
			}
		}
		if done || err != nil {
			return err
		}
	}
}

// sellOne is one round of sell; it reports whether the stock was empty.
func sellOne(worker int, s shop, m *dlock.Mutex, pause time.Duration, record func(order) error) (bool, error) {
	n, err := s.read()
	if err != nil || n <= 0 {
		return true, err
	}
	time.Sleep(pause)
	if err := s.write(n - 1); err != nil {
		return true, err
	}
	o := order{Worker: worker, Seen: n}
	if m != nil {
		o.Token = uint64(m.Token())
	}
	return false, record(o)
}
