package file_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/backend/file"
)

// Locks in one directory exclude each other across the processes of a host.
func ExampleNew() {
	dir, err := os.MkdirTemp("", "locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	l, err := file.New(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	m, err := l.NewMutex("jobs/nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", m.Token() > 0)
	fmt.Println("state file:", filepath.Base(file.Path(dir, m.Key())))
	if err := m.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// held: true
	// state file: k-jobs%2Fnightly-report.lock
}

// Programs usually pick the backend with a URL from their configuration.
func Example_open() {
	dir, err := os.MkdirTemp("", "locks")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	l, err := dlock.Open(ctx, "file://"+dir+"?ttl=10s")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	m, _ := l.NewMutex("inventory")
	err = dlock.Do(ctx, m, func(ctx context.Context) error {
		fmt.Println("lease:", m.Lease().TTL)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// lease: 10s
	// err: <nil>
}
