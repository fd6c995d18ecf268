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
func TestResumedSessionWithWatchesIsRaceFree(t *testing.T) {
	const watches, queued = 2000, 16
	raw := endpoint(t, "DLOCK_ZK_URL", "")
	for round := range 3 {
		p := newFrameProxy(t, hosts(t, raw)[0])
		d, _ := lockerOn(t, "zk://"+p.addr()+testPrefix+"?session_timeout=8s")
		base := fmt.Sprintf("%s/setwatches-%d-%d", testPrefix, time.Now().UnixNano(), round)
		for i := range watches {
			if _, _, _, err := d.conn.ExistsW(fmt.Sprintf("%s-%d", base, i)); err != nil {
				t.Fatal(err)
			}
		}
		sid := d.conn.SessionID()
		p.drop()
		eventually(t, 4*time.Second, "the client sees the disconnection", func() bool {
			return d.conn.State() != zk.StateHasSession
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
