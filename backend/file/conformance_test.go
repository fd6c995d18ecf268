package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
	"github.com/dlock-go/dlock/conformance"
	"github.com/dlock-go/dlock/driver"
)

// BENCHMARKS
//
//	go test -run '^$' -bench . -benchtime 2s ./backend/file/
//
// On the 2-core development machine (AMD EPYC, shared with other builds),
// directory on ext4:
//
//	Uncontended     42 µs/op   (Lock+Unlock: two flocked read-modify-writes)
//	ParallelKeys    21 µs/op
//	Contended      764 acq/s   handoff p50 0.07 ms, p99 0.58 ms

func harness(t testing.TB) conformance.Harness {
	dir := t.TempDir()
	return conformance.Harness{
		NewLocker: func(_ context.Context, opts ...dlock.Option) (*dlock.Locker, error) {
			return file.New(dir, opts...)
		},
		NewDriver: func(context.Context) (driver.Locker, error) { return file.NewDriver(dir), nil },
		BreakLease: func(ctx context.Context, key string) error {
			held, err := file.Break(ctx, dir, key)
			if err != nil {
				return err
			}
			if !held {
				return fmt.Errorf("key %q not held", key)
			}
			return nil
		},
		URL: "file://" + dir,
		CutOff: func(_ testing.TB, _ context.Context, opts ...dlock.Option) (*dlock.Locker, conformance.Link, error) {
			l, err := file.New(dir, opts...)
			return l, &flockCut{dir: dir}, err
		},
		TTL:         500 * time.Millisecond,
		InProcess:   true, // no server to be unreachable
		Queue:       true, // the tickets of waiting Locks
		CloseRounds: 300,
	}
}

func TestConformance(t *testing.T) { conformance.Run(t, harness(t)) }

// flockCut cuts Lockers off from a directory as a stuck process would:
// it holds the flock of every file in it, so that every update waits.
type flockCut struct {
	dir string
	mu  sync.Mutex
	fds []int
}

func (c *flockCut) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		panic(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		fd, err := unix.Open(filepath.Join(c.dir, e.Name()), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // removed meanwhile
		}
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			unix.Close(fd)
			panic(err)
		}
		c.fds = append(c.fds, fd)
	}
}

func (c *flockCut) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fd := range c.fds {
		unix.Close(fd)
	}
	c.fds = nil
}

func BenchmarkConformance(b *testing.B) { conformance.RunBenchmarks(b, harness(b)) }
