package lockctl

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/driver"
)

func init() {
	// go-redis logs pool events (a pub/sub connection closed by its owner,
	// a reconnect) to stderr; in a command-line tool they are noise next
	// to the errors dlock returns.
	goredis.SetLogger(quietLogger{})
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// requestCounter reads a server-side count of the requests the backend has
// served, so that lockctl bench can report requests per acquisition from
// the difference before and after a scenario. The counts are server-wide:
// other clients of the same servers add to them.
type requestCounter interface {
	count(ctx context.Context) (uint64, error)
	close()
	// what describes the count, for the reports.
	what() string
}

// newRequestCounter returns a counter for the backend at rawURL, or nil
// when lockctl knows no way to count its requests.
func newRequestCounter(rawURL string) requestCounter {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	switch strings.ToLower(u.Scheme) {
	case "redis", "redis+cluster", "redlock":
		hosts, err := driver.Hosts(u, "6379")
		if err != nil {
			return nil
		}
		c := &redisCounter{}
		pass, _ := u.User.Password()
		for _, h := range hosts {
			c.clients = append(c.clients, goredis.NewClient(&goredis.Options{
				Addr: h, Username: u.User.Username(), Password: pass,
				DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1,
			}))
		}
		return c
	case "etcd":
		hosts, err := driver.Hosts(u, "2379")
		if err != nil {
			return nil
		}
		return &etcdCounter{hosts: hosts, client: &http.Client{Timeout: 2 * time.Second}}
	case "zk":
		hosts, err := driver.Hosts(u, "2181")
		if err != nil {
			return nil
		}
		return &zkCounter{hosts: hosts}
	}
	return nil
}

// redisCounter sums the calls of every command in INFO commandstats, less
// INFO itself, over every master of the URL.
type redisCounter struct{ clients []*goredis.Client }

func (c *redisCounter) what() string {
	return "Redis commands, including those run inside Lua scripts (INFO commandstats)"
}

func (c *redisCounter) count(ctx context.Context) (uint64, error) {
	var total uint64
	for _, cl := range c.clients {
		info, err := cl.Info(ctx, "commandstats").Result()
		if err != nil {
			return 0, err
		}
		n, err := parseCommandStats(info)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (c *redisCounter) close() {
	for _, cl := range c.clients {
		_ = cl.Close()
	}
}

// parseCommandStats sums calls= over "cmdstat_NAME:calls=N,..." lines,
// leaving out INFO (the counter's own) and the connection-setup commands
// clients send once per connection.
func parseCommandStats(info string) (uint64, error) {
	var total uint64
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "info", "hello", "client|setinfo", "client|setname", "auth", "select":
			continue
		}
		for _, field := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(field, "calls="); ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("commandstats line %q: %w", line, err)
				}
				total += n
			}
		}
	}
	return total, nil
}

// etcdCounter sums grpc_server_msg_received_total (every gRPC request
// message, streams included) from each member's /metrics.
type etcdCounter struct {
	hosts  []string
	client *http.Client
}

func (c *etcdCounter) what() string { return "etcd gRPC messages received (/metrics)" }

func (c *etcdCounter) count(ctx context.Context) (uint64, error) {
	var total uint64
	for _, h := range c.hosts {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h+"/metrics", nil)
		if err != nil {
			return 0, err
		}
		resp, err := c.client.Do(req)
		if err != nil {
			return 0, err
		}
		n, err := sumMetric(resp.Body, "grpc_server_msg_received_total")
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func (c *etcdCounter) close() {}

// sumMetric adds up the samples of one metric in Prometheus text format.
func sumMetric(r io.Reader, metric string) (uint64, error) {
	var total float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric) {
			continue
		}
		rest := line[len(metric):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // another metric with this prefix
		}
		fields := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		total += v
	}
	return uint64(total), sc.Err()
}

// zkCounter sums zk_packets_received from each server's mntr.
type zkCounter struct{ hosts []string }

func (c *zkCounter) what() string { return "ZooKeeper packets received (mntr)" }

func (c *zkCounter) count(ctx context.Context) (uint64, error) {
	var total uint64
	for _, h := range c.hosts {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", h)
		if err != nil {
			return 0, err
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = io.WriteString(conn, "mntr")
		var out []byte
		if err == nil {
			out, err = io.ReadAll(conn)
		}
		conn.Close()
		if err != nil {
			return 0, err
		}
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "zk_packets_received"); ok {
				n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return 0, fmt.Errorf("mntr line %q: %w", line, err)
				}
				total += n
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("%s: no zk_packets_received in mntr (is mntr in 4lw.commands.whitelist?)", h)
		}
	}
	return total, nil
}

func (c *zkCounter) close() {}

// RequestCounter counts the requests a backend's servers have served, as
// lockctl bench does (Redis: INFO commandstats; etcd: /metrics;
// ZooKeeper: mntr), for other benchmarks of this module
// (tools/internal/benchpeers).
type RequestCounter struct{ c requestCounter }

// NewRequestCounter returns a counter for the backend at rawURL, or nil
// when lockctl knows no way to count its requests.
func NewRequestCounter(rawURL string) *RequestCounter {
	c := newRequestCounter(rawURL)
	if c == nil {
		return nil
	}
	return &RequestCounter{c}
}

// Count returns the servers' total so far (server-wide).
func (r *RequestCounter) Count(ctx context.Context) (uint64, error) { return r.c.count(ctx) }

// What describes what is counted.
func (r *RequestCounter) What() string { return r.c.what() }

// Close releases the counter's connections.
func (r *RequestCounter) Close() { r.c.close() }
