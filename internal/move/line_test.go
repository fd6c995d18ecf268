package move_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A C1 Locker's Lock waits in X's line beside C0's waiters. On a store
// whose line refuses every attempt made out of turn (file://), a C1 Lock
// that only watched and retried was refused for as long as C0 waiters
// kept the line busy: it starved. Here two C0 workers take the key in
// turn without a pause; the C1 worker must get its share long before
// they have made 200 acquisitions.
func TestC1WaitsInXsLine(t *testing.T) {
	x, y := "file://"+t.TempDir(), "file://"+t.TempDir()
	key := uniq(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var c0, c1 atomic.Int64
	const want = 5
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		m := mutex(t, open(t, x), key)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c0.Load() < 200 {
				select {
				case <-stop:
					return
				default:
				}
				if err := dlock.Do(ctx, m, func(context.Context) error {
					time.Sleep(time.Millisecond)
					return nil
				}); err != nil {
					if ctx.Err() == nil {
						t.Errorf("C0: %v", err)
					}
					return
				}
				c0.Add(1)
			}
		}()
	}
	m1 := mutex(t, open(t, c1URL(x, y)), key)
	lctx, lcancel := context.WithCancel(ctx)
	go func() {
		for c0.Load() < 200 && lctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		lcancel() // C0 is done: a C1 Lock still waiting has starved
	}()
	for c1.Load() < want {
		err := dlock.Do(lctx, m1, func(context.Context) error {
			time.Sleep(time.Millisecond)
			return nil
		})
		if err != nil {
			break
		}
		c1.Add(1)
	}
	close(stop)
	lcancel()
	wg.Wait()
	if got := c1.Load(); got < want {
		t.Fatalf("C1 made %d acquisitions while C0 made %d; want %d: it starved behind X's line", got, c0.Load(), want)
	}
}

func mutex(t *testing.T, l *dlock.Locker, key string) *dlock.Mutex {
	t.Helper()
	m, err := l.NewMutex(key)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
