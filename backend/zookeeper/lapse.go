package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Lapser = (*zkDriver)(nil)

// minHoldName is the name of a key's minimum-hold marker, a persistent
// child of the key's znode: the key stays held until the marker's mtime
// plus the minimum in its data, both leader-clock times, whatever became
// of the session that wrote it. dlock's queue ignores it (fewer than the
// ten digits of a sequence number after "lock-"); go-zookeeper's zk.Lock
// and Curator, which read the digits after "lock-" as its sequence, sort
// it after every lock node numbered below 999999999, so it does not block
// them (nor do they honour it).
const minHoldName = "_minhold-lock-999999999"

// minHoldPrefix starts a marker's data: "dlock minhold ms=MS", a newline
// and the token (czxid) of the hold whose minimum it keeps, for Inspect.
const minHoldPrefix = "dlock minhold ms="

// minHoldData is a marker's data for a minimum of d, rounded up to the
// millisecond, kept for the hold with token.
func minHoldData(d time.Duration, token int64) []byte {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return []byte(minHoldPrefix + strconv.FormatInt(int64(ms), 10) + "\n" + strconv.FormatInt(token, 10))
}

// parseMinHold reads minHoldData; ok is false for anything else.
func parseMinHold(b []byte) (least time.Duration, token int64, ok bool) {
	s, found := strings.CutPrefix(string(b), minHoldPrefix)
	ms, tok, _ := strings.Cut(s, "\n")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !found || err != nil || n < 0 {
		return 0, 0, false
	}
	token, _ = strconv.ParseInt(tok, 10, 64)
	return time.Duration(n) * time.Millisecond, token, true
}

// hasMinHold reports whether a listing of a key's znode shows its marker.
func hasMinHold(children []string) bool {
	for _, c := range children {
		if c == minHoldName {
			return true
		}
	}
	return false
}

// minHeld reads the key's marker, which the listing that showed our node
// first also showed, and returns how long the key stays held by it: zero
// when it has run out (it is then deleted, unless we are about to write it
// again, keep).
//
// The marker says until when in the leader's clock (mtime + minimum); our
// node's ctime is the leader's clock when it was created, and seen is our
// clock once the create had been applied. So the marker runs out, in our
// clock, no later than seen + (mtime + minimum + 1ms - ctime), the 1ms
// making up for the millisecond truncation of both times: waiting until
// then never ends the minimum early (it may add the create's latency).
func (d *zkDriver) minHeld(ctx context.Context, a *attempt, own *zk.Stat, keep bool) (time.Duration, error) {
	path := a.keyPath + "/" + minHoldName
	type got struct {
		data []byte
		st   *zk.Stat
	}
	g, err := call(ctx, func() (got, error) {
		data, st, err := d.conn.Get(path)
		return got{data, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil // cleaned meanwhile: it had run out
	}
	if err != nil {
		return 0, d.fail("read the minimum hold", err)
	}
	least, _, ok := parseMinHold(g.data)
	if !ok {
		return 0, nil
	}
	end := g.st.Mtime + least.Milliseconds() + 1 - own.Ctime // ms after our create
	left := time.Until(a.seen.Add(time.Duration(end) * time.Millisecond))
	if left > 0 {
		return left, nil
	}
	if !keep {
		version := g.st.Version
		go func() { _ = d.conn.Delete(path, version) }() // a later marker has another version
	}
	return 0, nil
}

// markMinHold writes the key's marker for a minimum of least from now,
// together with ops (which run only if it is written), provided our node
// at path still exists: one multi, [check our node, set or create the
// marker, ops...]. It reports ErrNotHeld when our node is gone, and
// changes nothing then.
func (d *zkDriver) markMinHold(ctx context.Context, keyPath, path string, least time.Duration, token int64, ops ...any) error {
	marker := keyPath + "/" + minHoldName
	data := minHoldData(least, token)
	create := false // the marker is usually there: set it first
	for tries := 0; ; tries++ {
		var write any = &zk.SetDataRequest{Path: marker, Data: data, Version: -1}
		if create {
			write = &zk.CreateRequest{Path: marker, Data: data, Acl: d.acl, Flags: zk.FlagPersistent}
		}
		all := append([]any{&zk.CheckVersionRequest{Path: path, Version: -1}, write}, ops...)
		res, err := call(ctx, func() ([]zk.MultiResponse, error) { return d.conn.Multi(all...) })
		if err == nil {
			return nil
		}
		switch {
		case len(res) < 2:
			return d.fail("write the minimum hold", err)
		case errors.Is(res[0].Error, zk.ErrNoNode):
			return fmt.Errorf("zookeeper: our lock node is gone: %w", driver.ErrNotHeld)
		case tries < 3 && errors.Is(res[1].Error, zk.ErrNoNode):
			create = true
		case tries < 3 && errors.Is(res[1].Error, zk.ErrNodeExists):
			create = false
		default:
			return d.fail("write the minimum hold", err)
		}
	}
}

// dropMinHold deletes key's minimum-hold marker, if any (Break).
func (d *zkDriver) dropMinHold(ctx context.Context, key string) error {
	marker := d.prefix + "/" + nodeName(key) + "/" + minHoldName
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, d.conn.Delete(marker, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return d.fail("delete the minimum hold", err)
	}
	return nil
}

// minHoldInfo is Inspect's answer for a key whose queue is empty but whose
// listing shows its marker: held while the marker runs, by the hold it
// names. The marker's end is a leader-clock time and there is no node of
// ours to measure it against, so Remaining is read against this client's
// clock: an estimate, off by the skew between the two.
func (d *zkDriver) minHoldInfo(ctx context.Context, keyPath string) (driver.Info, error) {
	type got struct {
		data []byte
		st   *zk.Stat
	}
	g, err := call(ctx, func() (got, error) {
		data, st, err := d.conn.Get(keyPath + "/" + minHoldName)
		return got{data, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return driver.Info{}, nil
	}
	if err != nil {
		return driver.Info{}, d.fail("read the minimum hold", err)
	}
	least, token, ok := parseMinHold(g.data)
	left := time.Until(time.UnixMilli(g.st.Mtime).Add(least))
	if !ok || left <= 0 {
		return driver.Info{}, nil
	}
	return driver.Info{Held: true, Token: uint64(token), Remaining: left}, nil
}

// ReleaseAfter lets h lapse: one multi [check our node, set the key's
// marker to d (rounded up to the millisecond) from now, delete our node],
// so that the node goes and the marker keeps the key held in its place,
// whatever becomes of the session. The next in the queue is woken by the
// deletion and waits out the marker on a timer before it is granted (see
// minHeld). If our node is gone (broken, expired), nothing is written and
// the error wraps ErrNotHeld. If the outcome is unknown, our node is
// deleted as a failed Release's is; a hold made with Request.MinHold has
// its marker from the grant, which still keeps its minimum.
func (d *zkDriver) ReleaseAfter(ctx context.Context, dh driver.Hold, dur time.Duration) error {
	h, err := holdOf(dh)
	if err != nil {
		return err
	}
	if dur <= 0 {
		return d.Release(ctx, dh)
	}
	if !h.end(nil) {
		return fmt.Errorf("zookeeper: release: %w", driver.ErrNotHeld)
	}
	if err := d.check(ctx); err != nil {
		if !errors.Is(err, driver.ErrClosed) {
			d.clean.node(h.path, h.sid)
		}
		return err
	}
	t, err := d.releaseTurn(ctx, h)
	if err != nil {
		return err
	}
	defer t.Leave()
	keyPath := h.path[:strings.LastIndexByte(h.path, '/')]
	err = d.markMinHold(ctx, keyPath, h.path, dur, int64(dh.Token), &zk.DeleteRequest{Path: h.path, Version: -1})
	if err != nil && !errors.Is(err, driver.ErrNotHeld) {
		d.clean.node(h.path, h.sid)
	}
	return err
}
