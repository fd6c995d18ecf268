package zookeeper

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// On a reconnection that resumes the session, go-zookeeper reads the last
// zxid it saw (to set its watches again) while the receive loop it has
// just started may already write it for the answers to requests queued
// during the disconnection: a data race in the library, which the race
// detector reports here (this test fails under -race) unless the
// connection holds the answers back until the watches went out
// (observedConn).
//
// The client is given two proxies to the one server. go-zookeeper fails
// every request still queued with ErrNoServer when its reconnection
// wraps around its list of servers, which with a single address is every
// reconnection. With two, the test cuts the proxy in use while the other
// holds new connections unanswered; the requests are queued while the
// client waits there for its session, and the other proxy then lets the
// reconnection through.
func TestResumedSessionWithWatchesIsRaceFree(t *testing.T) {
	const watches, queued = 2000, 16
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	for round := range 3 {
		ps := []*frameProxy{newFrameProxy(t, hosts(t, raw)[0]), newFrameProxy(t, hosts(t, raw)[0])}
		d, _ := lockerOn(t, "zk://"+ps[0].addr()+","+ps[1].addr()+testPrefix+"?session_timeout=8s")
		base := fmt.Sprintf("%s/setwatches-%d-%d", testPrefix, time.Now().UnixNano(), round)
		for i := range watches {
			if _, _, _, err := d.conn.ExistsW(fmt.Sprintf("%s-%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		sid := d.conn.SessionID()
		cur, next := ps[0], ps[1]
		if cur.open() == 0 {
			cur, next = next, cur
		}
		release := next.hold(t)
		cur.drop()
		eventually(t, 4*time.Second, "the client reconnects through the other proxy", func() bool {
			return next.accepted.Load() > 0 && d.conn.State() != zk.StateHasSession
		})
		var wg sync.WaitGroup
		errs := make(chan error, queued)
		for i := range queued {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := d.conn.Exists(fmt.Sprintf("%s-queued-%d", base, i))
				errs <- err
			}()
		}
		// Not a speed limit: the requests are meant to be queued before the
		// reconnection goes through, and they are answered whenever it does.
		time.Sleep(200 * time.Millisecond)
		release()
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a request queued during the disconnection: %v", err)
			}
		}
		if d.conn.SessionID() != sid {
			t.Fatalf("session 0x%x after the reconnection; want 0x%x resumed", d.conn.SessionID(), sid)
		}
	}
}
