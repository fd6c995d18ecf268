package zookeeper

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Inspector = (*zkDriver)(nil)

// dataPrefix starts the data of a dlock lock node: "dlock ttl=MS\n" then
// the holder's description (Request.Meta). Nodes of other recipes on the
// same path (zk.Lock: none; Curator: an IP address) have other data.
const dataPrefix = "dlock ttl="

// nodeData is the data of the lock node for req.
func nodeData(req driver.Request) []byte {
	return []byte(dataPrefix + strconv.FormatInt(req.TTL.Milliseconds(), 10) + "\n" + req.Meta)
}

// parseData reads nodeData; ok is false for a node another recipe made.
func parseData(b []byte) (ttl time.Duration, meta string, ok bool) {
	s, found := strings.CutPrefix(string(b), dataPrefix)
	if !found {
		return 0, "", false
	}
	ms, meta, found := strings.Cut(s, "\n")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil || n <= 0 {
		return 0, "", false
	}
	return time.Duration(n) * time.Millisecond, meta, true
}

// Inspect lists key's queue after a sync (the leader's view) and reads the
// lowest node: token = its czxid, description from its data, Waiters =
// the nodes behind it. ZooKeeper keeps no lease end for a node: Remaining
// is the holder's TTL (its session timeout), the longest the node can
// still outlive a holder the server no longer hears from (0 for a node of
// another recipe). A key whose queue is empty but whose minimum-hold
// marker still runs (see lapse.go) reads as held by the hold the marker
// names, Remaining estimated against this client's clock. It changes
// nothing.
func (d *zkDriver) Inspect(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	info, _, err := d.inspect(ctx, key)
	return info, err
}

// Break deletes the lowest node of key's queue, whoever made it, and
// leaves the others queued: the next is granted (it watches the node just
// before its own) with a higher czxid. The broken holder's watch on its
// node, or failing that its next renewal, finds the node gone and closes
// its Done with ErrLockLost. The key's minimum-hold marker, if any, is
// deleted too (see lapse.go): a broken key is free for the next in line.
func (d *zkDriver) Break(ctx context.Context, key string) (driver.Info, error) {
	if err := d.check(ctx); err != nil {
		return driver.Info{}, err
	}
	for {
		info, path, err := d.inspect(ctx, key)
		if err != nil || path == "" { // free, or held by a minimum alone
			if err == nil {
				err = d.dropMinHold(ctx, key)
			}
			return info, err
		}
		_, err = call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(path, -1) })
		switch {
		case err == nil:
			return info, d.dropMinHold(ctx, key)
		case errors.Is(err, zk.ErrNoNode):
			// Released meanwhile: look again.
		default:
			return driver.Info{}, d.fail("delete", err)
		}
	}
}

// inspect returns key's Info and the path of its lowest node.
func (d *zkDriver) inspect(ctx context.Context, key string) (driver.Info, string, error) {
	keyPath := d.prefix + "/" + nodeName(key)
	for {
		if _, err := call(ctx, func() (string, error) { return d.conn.Sync(keyPath) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Info{}, "", d.fail("sync", err)
		}
		children, err := d.children(ctx, keyPath)
		if errors.Is(err, zk.ErrNoNode) {
			return driver.Info{Waiters: 0}, "", nil
		}
		if err != nil {
			return driver.Info{}, "", d.fail("list", err)
		}
		q := queue(children)
		if len(q) == 0 && hasMinHold(children) {
			info, err := d.minHoldInfo(ctx, keyPath)
			return info, "", err
		}
		if len(q) == 0 {
			return driver.Info{Waiters: 0}, "", nil
		}
		path := keyPath + "/" + q[0].name
		type got struct {
			data []byte
			st   *zk.Stat
		}
		g, err := call(ctx, func() (got, error) {
			data, st, err := d.conn.Get(path)
			return got{data, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: list again
		}
		if err != nil {
			return driver.Info{}, "", d.fail("get", err)
		}
		ttl, meta, _ := parseData(g.data)
		return driver.Info{Held: true, Token: uint64(g.st.Czxid), Remaining: ttl, Meta: meta, Waiters: len(q) - 1}, path, nil
	}
}
