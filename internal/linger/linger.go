// Package linger makes contexts that outlive their parent by a grace
// period: for a request whose cancellation would cost more than its
// completion (a broken connection, an outcome left unknown), and whose
// reply is still expected soon.
package linger

import (
	"context"
	"sync"
	"time"
)

// After returns a context that carries ctx's values and ends grace after
// ctx ends (cancelled or past its deadline), or when stop is called. stop
// must be called to release it.
func After(ctx context.Context, grace time.Duration) (l context.Context, stop context.CancelFunc) {
	l, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu    sync.Mutex
		timer *time.Timer
	)
	stopAfter := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, cancel)
	})
	return l, func() {
		stopAfter()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
