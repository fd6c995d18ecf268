package zookeeper

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock/driver"
)

// recordsNode is the persistent znode under the prefix that holds the
// keys' records. A key's znode is named by nodeName, which escapes '.',
// so no key's znode is recordsNode, and no lock node is ever made under
// it.
const recordsNode = ".records"

// recordPath is the persistent znode holding key's record.
func (d *zkDriver) recordPath(key string) string {
	return d.prefix + "/" + recordsNode + "/" + nodeName(key)
}

// Record creates key's record znode with value unless it exists, and
// returns the record. A record znode is never deleted, so that its data
// version only ever grows: ClearRecord empties it with a compare-and-set
// on the version read, and Record fills an empty one the same way. Two
// changes made from the same version cannot both succeed, and no version
// comes back after a delete and a create, so a stale read can never win.
func (d *zkDriver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("zookeeper: %w", err)
	}
	path := d.recordPath(key)
	for tries := 0; ; tries++ {
		if err := d.check(ctx); err != nil {
			return "", err
		}
		_, err := call(ctx, func() (string, error) { return d.conn.Create(path, []byte(value), zk.FlagPersistent, d.acl) })
		switch {
		case err == nil:
			return value, nil
		case errors.Is(err, zk.ErrNoNode) && tries < 4:
			if err := d.ensureRecords(ctx); err != nil {
				return "", err
			}
			continue
		case errors.Is(err, zk.ErrNodeExists):
			// Read what is there.
		default:
			// A create whose reply was lost may have been applied, and
			// the record made: the next call finds it.
			return "", d.fail("create record", err)
		}
		data, st, err := d.readRecord(ctx, path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue // deleted from outside meanwhile
		case err != nil:
			return "", d.fail("read record", err)
		case len(data) > 0:
			return string(data), nil
		}
		// Cleared: fill it, unless another caller changed it first.
		_, err = call(ctx, func() (*zk.Stat, error) { return d.conn.Set(path, []byte(value), st.Version) })
		switch {
		case err == nil:
			return value, nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
			continue
		default:
			return "", d.fail("fill record", err)
		}
	}
}

// readRecord reads path's data after a sync, so that a follower answers
// with the leader's state, not its own copy.
func (d *zkDriver) readRecord(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	if _, err := call(ctx, func() (string, error) { return d.conn.Sync(path) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, nil, err
	}
	type got struct {
		data []byte
		st   *zk.Stat
	}
	g, err := call(ctx, func() (got, error) {
		data, st, err := d.conn.Get(path)
		return got{data, st}, err
	})
	return g.data, g.st, err
}

// ClearRecord empties key's record znode if it holds value, with a
// compare-and-set on the version it read: a record written after the read
// has another version and is left alone. A reply lost with the connection
// is an error wrapping driver.ErrUnavailable, since the record may or may
// not have been cleared.
func (d *zkDriver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("zookeeper: %w", err)
	}
	path := d.recordPath(key)
	for {
		data, st, err := d.readRecord(ctx, path)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		case err != nil:
			return false, d.fail("read record", err)
		case string(data) != value:
			return false, nil
		}
		_, err = call(ctx, func() (*zk.Stat, error) { return d.conn.Set(path, nil, st.Version) })
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, zk.ErrBadVersion):
			// Changed since the read (cleared, maybe filled again): look
			// again.
			if err := d.check(ctx); err != nil {
				return false, err
			}
		case errors.Is(err, zk.ErrNoNode):
			return false, nil
		default:
			return false, d.fail("clear record", err)
		}
	}
}

// ensureRecords creates the records znode, persistent, and the prefix
// above it.
func (d *zkDriver) ensureRecords(ctx context.Context) error {
	p := d.prefix + "/" + recordsNode
	for tries := 0; ; tries++ {
		_, err := call(ctx, func() (string, error) { return d.conn.Create(p, nil, zk.FlagPersistent, d.acl) })
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoNode) && tries < 2:
			if err := d.ensurePrefix(ctx); err != nil {
				return err
			}
		default:
			return d.fail("create records node", err)
		}
	}
}
