package movetest

import (
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/move/movetest"
	"github.com/dlock-go/dlock/internal/testenv"
)

// TestC1BesideC0Tokens: C1 and C0 holders contend on one key; each hold's
// token must be the key's current one on X when its Lock returns.
func TestC1BesideC0Tokens(t *testing.T) {
	r, e := stores(t)
	ctx := testenv.Context(t, 60*time.Second)
	var mu sync.Mutex
	var last dlock.Token
	var lastWho string
	stop := time.Now().Add(15 * time.Second)
	var wg sync.WaitGroup
	for i, u := range []string{r, r, movetest.C1(r, e), movetest.C1(r, e)} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := movetest.Open(t, u, dlock.WithTTL(2*time.Second))
			m, _ := l.NewMutex("k")
			n := 0
			for time.Now().Before(stop) {
				if err := m.Lock(ctx); err != nil {
					t.Errorf("worker %d: %v", i, err)
					return
				}
				mu.Lock()
				if m.Token() <= last {
					t.Errorf("worker %d (%s) token %d not above %d of %s", i, u[:5], m.Token(), last, lastWho)
				}
				last, lastWho = m.Token(), u[:5]
				mu.Unlock()
				n++
				time.Sleep(time.Millisecond)
				_ = m.Unlock(ctx)
			}
			t.Logf("worker %d (%s): %d holds", i, u[:5], n)
		}()
	}
	wg.Wait()
}
