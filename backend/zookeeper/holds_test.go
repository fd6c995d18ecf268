package zookeeper

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// A hold costs no goroutine on a Locker opened from a URL: its node's
// watch event reaches it through the connection's event callback
// (nodeWatches), and the driver reports loss through a callback
// (driver.LossNotifier), so nothing waits per hold. Over a caller's Conn,
// which has no callback the driver could use, a hold costs one goroutine,
// for its node's watch channel.
func TestHoldGoroutines(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(ctx context.Context, t *testing.T) *dlock.Locker
		max  float64
	}{
		{"url", func(ctx context.Context, t *testing.T) *dlock.Locker {
			l, err := openLocker(ctx, endpoint(t, "DLOCK_ZK_URL", ""))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, 0.02},
		{"conn", func(ctx context.Context, t *testing.T) *dlock.Locker {
			l, err := newOverConn(hosts(t, endpoint(t, "DLOCK_ZK_URL", "")))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, 1.05},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 300
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			l := c.open(ctx, t)
			defer l.Close()
			warm, _ := l.NewMutex("holds-warm-" + c.name)
			if err := warm.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			_ = warm.Unlock(ctx)
			g0 := fewestGoroutines(300 * time.Millisecond)
			ms := make([]*dlock.Mutex, n)
			for i := range ms {
				m, err := l.NewMutex("holds-" + c.name + "-" + strconv.Itoa(i))
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				ms[i] = m
			}
			if per := float64(fewestGoroutines(time.Second)-g0) / n; per > c.max {
				t.Fatalf("%.2f goroutines per hold; want at most %.2f", per, c.max)
			}
			for _, m := range ms {
				_ = m.Unlock(ctx)
			}
		})
	}
}

// fewestGoroutines is the fewest goroutines seen over d. A renewal round
// over a caller's Conn runs up to renewParallel reads at once, each in a
// goroutine that ends with it: what a hold keeps is what is left between
// rounds.
func fewestGoroutines(d time.Duration) int {
	least := runtime.NumGoroutine()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		least = min(least, runtime.NumGoroutine())
	}
	return least
}

// The node's watch reaches the hold with no goroutine of its own: an
// operator who deletes the node ends the hold at once (well before its
// next renewal would find it gone), also after a change to the node's data
// made the driver set the watch again; over a caller's Conn as well.
func TestNodeDeletedEndsHoldAtOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		open func(t *testing.T) *dlock.Locker
	}{
		{"url", func(t *testing.T) *dlock.Locker {
			l, err := openLocker(context.Background(), endpoint(t, "DLOCK_ZK_URL", "session_timeout=10s"))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}},
		{"conn", func(t *testing.T) *dlock.Locker {
			l, err := newOverConn(hosts(t, endpoint(t, "DLOCK_ZK_URL", "")))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			adm := admin(t, endpoint(t, "DLOCK_ZK_URL", ""))
			l := c.open(t)
			defer l.Close()
			for _, touch := range []bool{false, true} {
				key := "deleted/" + c.name + "/" + strconv.FormatBool(touch) + "/" + strconv.FormatInt(time.Now().UnixNano(), 10)
				m, err := l.NewMutex(key)
				if err != nil {
					t.Fatal(err)
				}
				lockNow(t, m)
				node := onlyNode(t, adm, key)
				if touch {
					if _, err := adm.Set(node, []byte("operator"), -1); err != nil {
						t.Fatal(err)
					}
					time.Sleep(200 * time.Millisecond)
					select {
					case <-m.Done():
						t.Fatalf("a change to the node's data ended the hold: %v", m.Err())
					default:
					}
				}
				if err := adm.Delete(node, -1); err != nil {
					t.Fatal(err)
				}
				select {
				case <-m.Done():
				case <-time.After(700 * time.Millisecond): // well before the next renewal (1.3 s or 3.3 s after the grant)
					t.Fatalf("hold still live 700ms after its node was deleted (data changed first: %v)", touch)
				}
				if !errors.Is(m.Err(), dlock.ErrLockLost) {
					t.Fatalf("Err after the node's deletion: %v; want ErrLockLost", m.Err())
				}
			}
		})
	}
}
