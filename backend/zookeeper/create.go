package zookeeper

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// createResult is the outcome of one create, handed to the cleaner when
// its caller stopped waiting.
type createResult struct {
	path string
	err  error
}

// create makes our node, creating the key's znode and the prefix when they
// are missing. A create whose reply was lost may have been applied: the
// node is then looked for by its GUID before creating another.
//
// sent is when the create that made the node was sent, zero when the node
// was found by its GUID instead. The leader checked the session when it
// applied that create, and the server answered only once it had applied it
// too: the session was live on the leader after sent, and a read sent on
// this connection after the answer sees every change ordered before the
// create (see queue).
func (d *zkDriver) create(ctx context.Context, a *attempt) (path string, sent time.Time, err error) {
	for tries := 0; ; tries++ {
		sent := time.Now()
		path, err := d.createOnce(ctx, a)
		switch {
		case err == nil:
			a.seen = time.Now()
			return path, sent, nil
		case errors.Is(err, zk.ErrNoNode) && tries < 4:
			if err := d.ensureKey(ctx, a.keyPath); err != nil {
				return "", time.Time{}, err
			}
		case ambiguous(err) && tries < 4:
			path, err := d.findGUID(ctx, a)
			if err != nil {
				d.clean.guid(a.keyPath, a.guid)
				return "", time.Time{}, err
			}
			if path != "" {
				a.seen = time.Now()
				return path, time.Time{}, nil
			}
		default:
			return "", time.Time{}, d.fail("create", err)
		}
	}
}

// createOnce sends one create. If ctx ends first, whatever the create
// makes is deleted (undoCreate).
func (d *zkDriver) createOnce(ctx context.Context, a *attempt) (string, error) {
	prefix := a.keyPath + "/" + protectedPrefix + a.guid + lockInfix
	data := nodeData(a.req)
	if ctx.Done() == nil {
		return d.conn.Create(prefix, data, zk.FlagEphemeralSequential, d.acl)
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	res := make(chan createResult, 1)
	go func() {
		p, err := d.conn.Create(prefix, data, zk.FlagEphemeralSequential, d.acl)
		res <- createResult{p, err}
	}()
	select {
	case r := <-res:
		return r.path, r.err
	case <-ctx.Done():
		d.undoCreate(a, res)
		return "", ctx.Err()
	}
}

// undoCreate deletes what a create cut short by ctx makes. Left to the
// cleaner, the node would stand first in the key's line for a moment after
// Lock returned its error, and another process's TryLock then was refused
// although this Lock held nothing (a Lock cancelled as the key was handed
// to it, under load). So the create's answer is awaited a little, as leave
// awaits its delete, and what it made is deleted before Lock returns; if
// the answer does not come in time, the cleaner takes over.
func (d *zkDriver) undoCreate(a *attempt, res chan createResult) {
	t := time.NewTimer(min(d.sessionTimeout()/2, time.Second))
	defer t.Stop()
	select {
	case r := <-res:
		switch {
		case r.err == nil:
			d.leave(context.Background(), r.path)
		case ambiguous(r.err):
			d.clean.guid(a.keyPath, a.guid)
		}
		return
	case <-t.C:
	case <-d.closed:
	}
	d.clean.abandoned(a.keyPath, a.guid, res)
}

// findGUID looks for the node a create with a lost reply may have made.
func (d *zkDriver) findGUID(ctx context.Context, a *attempt) (string, error) {
	if _, err := call(ctx, func() (string, error) { return d.conn.Sync(a.keyPath) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return "", d.fail("sync", err)
	}
	children, err := d.children(ctx, a.keyPath)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", d.fail("list", err)
	}
	for _, n := range queue(children) {
		if hasGUID(n.name, a.guid) {
			return a.keyPath + "/" + n.name, nil
		}
	}
	return "", nil
}

// ensureKey creates the key's znode as a container, which the server
// deletes some time after its last child goes, and the prefix above it.
func (d *zkDriver) ensureKey(ctx context.Context, keyPath string) error {
	for tries := 0; ; tries++ {
		_, err := call(ctx, func() (string, error) {
			return d.conn.CreateContainer(keyPath, nil, zk.FlagContainer, d.acl)
		})
		switch {
		case err == nil, errors.Is(err, zk.ErrNodeExists):
			return nil
		case errors.Is(err, zk.ErrNoNode) && tries < 2:
			if err := d.ensurePrefix(ctx); err != nil {
				return err
			}
		default:
			return d.fail("create key node", err)
		}
	}
}

// ensurePrefix creates the missing persistent nodes of the prefix, looking
// before creating so that a user without the right to create in an
// existing parent can still use it.
func (d *zkDriver) ensurePrefix(ctx context.Context) error {
	p := ""
	for _, seg := range strings.Split(d.prefix[1:], "/") {
		p += "/" + seg
		ok, err := call(ctx, func() (bool, error) {
			ok, _, err := d.conn.Exists(p)
			return ok, err
		})
		if err != nil {
			return d.fail("look up prefix", err)
		}
		if ok {
			continue
		}
		_, err = call(ctx, func() (string, error) { return d.conn.Create(p, nil, zk.FlagPersistent, d.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return d.fail("create prefix "+p, err)
		}
	}
	return nil
}
