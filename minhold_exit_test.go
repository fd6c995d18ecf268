package dlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/file"
	_ "github.com/dlock-go/dlock/backend/redis"
	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/testenv"
)

// The helper process of TestMinHoldProcessExit: this test binary, run again
// with these variables set.
const (
	exitChildURL = "DLOCK_MINHOLD_CHILD_URL"
	exitChildKey = "DLOCK_MINHOLD_CHILD_KEY"
)

// exitMinHold is the helper's minimum hold; its TTL is much shorter, so
// that only the minimum can keep the key held as long.
const (
	exitMinHold = 10 * time.Second // long enough that the check below never comes too late
	exitTTL     = time.Second
)

// minHoldChild takes the lock with a minimum hold, says so, and exits
// without Unlock or Close.
func minHoldChild(raw, key string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := dlock.Open(ctx, raw, dlock.WithTTL(exitTTL), dlock.WithMinHold(exitMinHold))
	if err == nil {
		var m *dlock.Mutex
		if m, err = l.NewMutex(key); err == nil {
			err = m.TryLock(ctx)
		}
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("held")
	os.Exit(0) // no Unlock, no Close: the process is gone
}

// A process that takes a lock with a minimum hold and exits without
// releasing it leaves the key held until the minimum has passed from the
// grant (the lease asked for is the minimum, not the shorter TTL), then
// free: file:// and redis:// alike.
func TestMinHoldProcessExit(t *testing.T) {
	if raw := os.Getenv(exitChildURL); raw != "" {
		minHoldChild(raw, os.Getenv(exitChildKey))
		return
	}
	dir := t.TempDir()
	backends := map[string]func(t *testing.T) string{
		"file":  func(*testing.T) string { return "file://" + dir },
		"redis": func(t *testing.T) string { return testenv.Endpoint(t, "DLOCK_REDIS_URL") },
	}
	for name, url := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw := url(t)
			ctx := testenv.Context(t, time.Minute)
			key := testenv.Unique(t, "minhold-exit")
			start := time.Now()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMinHoldProcessExit$")
			cmd.Env = append(os.Environ(), exitChildURL+"="+raw, exitChildKey+"="+key)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if err := cmd.Wait(); err != nil || strings.TrimSpace(line) != "held" {
				t.Fatalf("helper: %v, said %q; want it to take the lock and exit", err, line)
			}
			l, err := dlock.Open(ctx, raw, dlock.WithTTL(exitTTL))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			m, err := l.NewMutex(key)
			if err != nil {
				t.Fatal(err)
			}
			soon := exitMinHold - driver.DriftAllowance(exitMinHold) - 10*time.Millisecond
			err = m.TryLock(ctx)
			switch since := time.Since(start); {
			case err == nil && since < soon:
				t.Fatalf("TryLock %v after the helper began succeeded; want ErrNotAcquired until its minimum hold of %v", since, exitMinHold)
			case err == nil:
				t.Fatalf("TryLock ran %v after the helper began, past its minimum hold of %v: too late to check it", since, exitMinHold)
			case !errors.Is(err, dlock.ErrNotAcquired):
				t.Fatalf("TryLock during the helper's minimum hold: %v; want ErrNotAcquired", err)
			}
			if err := m.Lock(ctx); err != nil {
				t.Fatalf("Lock after the helper's minimum hold: %v", err)
			}
			if since := time.Since(start); since < soon {
				t.Errorf("the key was free %v after the helper began; want no earlier than its minimum hold of %v", since, exitMinHold)
			}
			if err := m.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}
