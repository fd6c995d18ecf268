package lockctl

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/backend/zookeeper"
)

// zkLogger catches the session timeout go-zookeeper logs when a session
// is established (it does not expose the negotiated value otherwise).
type zkLogger struct {
	mu      sync.Mutex
	timeout time.Duration
}

func (l *zkLogger) Printf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if _, rest, ok := strings.Cut(msg, "timeout="); ok && strings.HasPrefix(msg, "authenticated") {
		if ms, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
			l.mu.Lock()
			l.timeout = time.Duration(ms) * time.Millisecond
			l.mu.Unlock()
		}
	}
}

func (l *zkLogger) get() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.timeout
}

// zkWord sends a four-letter word and returns the reply's lines as fields.
func zkWord(ctx context.Context, server, word string) (map[string]string, error) {
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return nil, err
	}
	f := map[string]string{}
	sc := bufio.NewScanner(c)
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Text()
		if strings.Contains(line, "is not executed because it is not in the whitelist") {
			return nil, fmt.Errorf("%s: four-letter word %q disabled (4lw.commands.whitelist)", server, word)
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			k, v, ok = strings.Cut(line, "=")
		}
		if ok {
			f[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	if lines == 0 {
		return nil, fmt.Errorf("%s: no reply to four-letter word %q (disabled?)", server, word)
	}
	return f, nil
}

func (d *doctor) zookeeper(ctx context.Context) error {
	servers, err := d.hosts("2181")
	if err != nil {
		return err
	}
	requested := zookeeper.DefaultSessionTimeout
	if v := d.u.Query().Get("session_timeout"); v != "" {
		if requested, err = time.ParseDuration(v); err != nil {
			return err
		}
	}
	lg := &zkLogger{}
	conn, events, err := zk.Connect(servers, requested, zk.WithLogger(lg), zk.WithLogInfo(true))
	if err != nil {
		return err
	}
	defer conn.Close()
	for lg.get() == 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("no ZooKeeper session: %w", ctx.Err())
		case <-events:
		case <-time.After(10 * time.Millisecond):
		}
	}
	granted := lg.get()
	if !d.ttlSet {
		d.ttl = granted // the zk backend's TTL is the granted session timeout
	}
	switch {
	case d.ttlSet && d.ttl != granted:
		d.add("zk.session-timeout", LevelBroken, fmt.Sprintf("session timeout granted %v (asked %v), but the lease asked for is %v", granted, requested, d.ttl),
			"the zk backend's TTL is the granted session timeout: a holder cut off keeps its node until the session expires, and the server hands the lock on one session timeout after it last heard from it; another TTL is refused (dlock.ErrInvalidOption)",
			fmt.Sprintf("ask for session_timeout=%v in the URL, or drop ttl= (the lease is then the granted timeout); the server clamps the request to its minSessionTimeout..maxSessionTimeout", d.ttl))
	case granted != requested:
		d.add("zk.session-timeout", LevelInfo, fmt.Sprintf("session timeout granted %v, asked %v: the server clamped it, and the lease is %v", granted, requested, granted), "", "")
	default:
		d.ok("zk.session-timeout", fmt.Sprintf("session timeout %v granted as asked; it is the lease", granted))
	}

	d.info("clock.skew", "ZooKeeper reports no server time to clients: doctor cannot measure the clock skew (run NTP on every host)")
	var rtt time.Duration
	for range 5 {
		before := time.Now()
		if _, _, err := conn.Exists("/"); err != nil {
			return err
		}
		if took := time.Since(before); rtt == 0 || took < rtt {
			rtt = took
		}
	}
	d.roundTrip("rtt", rtt)

	var versions []string
	size := 0
	for _, s := range servers {
		f, err := zkWord(ctx, s, "srvr")
		if err != nil {
			d.unknown("zk.version", err)
			continue
		}
		v, _, _ := strings.Cut(f["Zookeeper version"], "-")
		versions = append(versions, s+" "+v+" ("+f["Mode"]+")")
		if f["Mode"] == "standalone" {
			size = 1
		}
		if c, err := zkWord(ctx, s, "conf"); err != nil {
			d.unknown("zk.conf", err)
		} else if size == 0 {
			// conf lists server.N=... lines for each member of the ensemble.
			n := 0
			for k := range c {
				if strings.HasPrefix(k, "server.") {
					n++
				}
			}
			size = n
		}
	}
	if len(versions) > 0 {
		d.info("zk.version", "ZooKeeper "+strings.Join(versions, ", "))
	}
	switch {
	case size == 0:
		d.info("zk.ensemble", "ensemble size unknown (srvr/conf not readable)")
	case size == 1:
		d.info("zk.ensemble", "standalone server: no failover (a restart makes locks unavailable, not unsafe)")
	case size%2 == 0:
		d.add("zk.ensemble", LevelWarning, fmt.Sprintf("%d servers in the ensemble", size),
			"an even ensemble tolerates no more failures than one server fewer, and a split into halves has no quorum: sessions cannot be kept alive on either side",
			"run 3 or 5 servers")
	default:
		d.ok("zk.ensemble", fmt.Sprintf("%d servers in the ensemble: tolerates %d failure(s)", size, (size-1)/2))
	}
	return nil
}
