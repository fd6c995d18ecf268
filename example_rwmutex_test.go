package dlock_test

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/fence"
)

// A read-write lock: readers share the key, a writer excludes them all.
// The resource checks each token: a write against the highest token of
// either kind it has seen, a read against the highest writer token only,
// so that readers never refuse each other.
func ExampleRWMutex() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-rwmutex")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	// At most 8 readers at a time; every client of the key says 8.
	writer, _ := locker.NewRWMutex("catalog", 8)
	reader, _ := locker.NewRWMutex("catalog", 8)

	var highestWrite, highestRead dlock.Token // kept by the resource
	if err := writer.Lock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	tok := writer.Token()
	fmt.Println("write accepted:", fence.Rule{Resource: "catalog", Highest: max(highestWrite, highestRead)}.Check(tok) == nil)
	highestWrite = tok
	_ = writer.Unlock(ctx)

	if err := reader.RLock(ctx); err != nil {
		fmt.Println(err)
		return
	}
	rtok := reader.Token()
	fmt.Println("read accepted:", fence.Rule{Resource: "catalog", Highest: highestWrite}.Check(rtok) == nil)
	highestRead = max(highestRead, rtok)
	fmt.Println("reader's token above the writer's:", rtok > tok)
	_ = reader.RUnlock(ctx)
	// Output:
	// write accepted: true
	// read accepted: true
	// reader's token above the writer's: true
}

// Do runs a function under a read hold through RLocker: its context ends
// if the read hold is lost.
func ExampleRWMutex_RLocker() {
	ctx := context.Background()
	locker, err := dlock.Open(ctx, "mem://example-rlocker")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	rw, _ := locker.NewRWMutex("catalog", 4)
	err = dlock.Do(ctx, rw.RLocker(), func(ctx context.Context) error {
		fmt.Println("reading with token > 0:", rw.Token() > 0)
		return nil
	})
	fmt.Println("done:", err, "held after:", rw.Token() != 0)
	// Output:
	// reading with token > 0: true
	// done: <nil> held after: false
}
