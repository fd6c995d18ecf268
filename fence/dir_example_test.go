//go:build linux

package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/file"
	"github.com/dlock-go/dlock/fence"
)

// A fenced write to a file of this host, under a lock of the file://
// backend, with no server: every process of the host that writes the
// report takes the lock and writes through the same fence directory, so a
// holder paused past its lease cannot overwrite a newer holder's report.
func ExampleDir() {
	dir, err := os.MkdirTemp("", "fenced")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	report := filepath.Join(dir, "report.txt")

	ctx := context.Background()
	locker, err := dlock.Open(ctx, "file://"+filepath.Join(dir, "locks"))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	fences, err := fence.OpenDir(filepath.Join(dir, "fences"))
	if err != nil {
		log.Fatal(err)
	}
	write := func(token dlock.Token, text string) error {
		return fences.Do("report", token, func() error {
			return os.WriteFile(report, []byte(text), 0o644)
		})
	}

	m, err := locker.NewMutex("report")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	defer m.Unlock(ctx)
	fmt.Println(write(m.Token(), "written by the holder\n"))

	// A holder from before, paused past its lease and resuming now, carries
	// a lower token: its late write is refused.
	err = write(m.Token()-1, "late write\n")
	fmt.Println(errors.Is(err, fence.ErrStale))

	b, err := os.ReadFile(report)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(b))
	// Output:
	// <nil>
	// true
	// written by the holder
}
