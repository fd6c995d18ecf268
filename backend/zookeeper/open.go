package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/driver"
)

// Scheme is the URL scheme this package registers.
const Scheme = "zk"

// Defaults of the URL parameters.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultConnectTimeout = 10 * time.Second
)

func init() { dlock.Register(Scheme, open) }

// Config configures a Locker made by New over a connection the caller has.
type Config struct {
	// SessionTimeout is the session timeout the server granted the
	// connection (required). It is the lease's minimum and the basis of
	// the loss signal, so it must not be longer than the real one: the
	// server may grant less than the client asked for (it clamps the
	// request to [2, 20] ticks by default), and go-zookeeper does not say
	// what it granted. Open reads the granted value from the wire.
	SessionTimeout time.Duration
	// Prefix is the znode under which locks live (default "/dlock").
	Prefix string
	// ACL is given to every node created (default zk.WorldACL(zk.PermAll)).
	ACL []zk.ACL
}

// New returns a Locker over conn, a connection the caller made and keeps
// ownership of: Close on the Locker releases its locks but leaves conn
// open. The options are defaults for the Locker's Mutexes.
func New(conn *zk.Conn, cfg Config, opts ...dlock.Option) (*dlock.Locker, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: zookeeper.New with a nil *zk.Conn", dlock.ErrInvalidOption)
	}
	if cfg.SessionTimeout <= 0 {
		return nil, fmt.Errorf("%w: zookeeper.Config.SessionTimeout must be the connection's session timeout, got %v",
			dlock.ErrInvalidOption, cfg.SessionTimeout)
	}
	prefix, err := cleanPrefix(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("%w: zookeeper.Config.Prefix: %w", dlock.ErrInvalidOption, err)
	}
	acl := cfg.ACL
	if len(acl) == 0 {
		acl = zk.WorldACL(zk.PermAll)
	}
	box := &sessionBox{}
	box.set(session{timeout: cfg.SessionTimeout})
	d := newDriver(conn, false, prefix, acl, box)
	l, err := dlock.NewLocker(d, opts...)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return l, nil
}

// options is what a zk:// URL says.
type options struct {
	servers        []string
	prefix         string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	creator        bool   // acl=creator
	auth           string // "user:password" for digest authentication
}

func parseURL(u *url.URL) (options, error) {
	var o options
	if u.Opaque != "" {
		return o, fmt.Errorf("%w: zk URL must be zk://host:port,host:port/chroot, got opaque %q", driver.ErrInvalidURL, u.Opaque)
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return o, fmt.Errorf("%w: zk URL takes no #fragment", driver.ErrInvalidURL)
	}
	servers, err := driver.Hosts(u, "2181")
	if err != nil {
		return o, err
	}
	o.servers = servers
	if o.prefix, err = cleanPrefix(u.Path); err != nil {
		return o, fmt.Errorf("%w: %w", driver.ErrInvalidURL, err)
	}
	p := driver.NewParams(u)
	o.sessionTimeout = p.Duration("session_timeout", DefaultSessionTimeout)
	o.connectTimeout = p.Duration("connect_timeout", DefaultConnectTimeout)
	acl := p.String("acl", "open")
	if err := p.Done(); err != nil {
		return o, err
	}
	if o.sessionTimeout < time.Millisecond || o.sessionTimeout > time.Duration(1<<31-1)*time.Millisecond {
		return o, fmt.Errorf("%w: session_timeout=%v: want at least 1ms (the server clamps it to its bounds)", driver.ErrInvalidURL, o.sessionTimeout)
	}
	if o.connectTimeout <= 0 {
		return o, fmt.Errorf("%w: connect_timeout=%v: want a positive duration", driver.ErrInvalidURL, o.connectTimeout)
	}
	if u.User != nil {
		pass, ok := u.User.Password()
		if u.User.Username() == "" || !ok {
			return o, fmt.Errorf("%w: zk URL credentials must be user:password (digest authentication)", driver.ErrInvalidURL)
		}
		o.auth = u.User.Username() + ":" + pass
	}
	switch acl {
	case "open":
	case "creator":
		if o.auth == "" {
			return o, fmt.Errorf("%w: acl=creator needs credentials (zk://user:password@host/...): nodes are then readable and writable only by that user", driver.ErrInvalidURL)
		}
		o.creator = true
	default:
		return o, fmt.Errorf("%w: acl=%q: want open or creator", driver.ErrInvalidURL, acl)
	}
	return o, nil
}

func open(ctx context.Context, u *url.URL) (driver.Locker, error) {
	o, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return dialDriver(ctx, o)
}

// dialDriver connects as o says and waits for the first session.
func dialDriver(ctx context.Context, o options) (*zkDriver, error) {
	box := &sessionBox{}
	var mon atomic.Pointer[monitor]
	conn, first, err := dial(ctx, o.servers, o.sessionTimeout, o.connectTimeout, box.set, func(ev zk.Event) {
		if m := mon.Load(); m != nil {
			m.event(ev)
		}
	})
	if err != nil {
		return nil, err
	}
	if box.p.Load() == nil {
		box.set(first)
	}
	if o.auth != "" {
		_, err := call(ctx, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", []byte(o.auth)) })
		if err != nil {
			go conn.Close()
			if errors.Is(err, zk.ErrAuthFailed) {
				return nil, fmt.Errorf("zookeeper: digest authentication: %w", err)
			}
			return nil, driver.Unavailable(fmt.Errorf("zookeeper: digest authentication: %w", err))
		}
	}
	acl := zk.WorldACL(zk.PermAll)
	if o.creator {
		acl = zk.AuthACL(zk.PermAll)
	}
	d := newDriver(conn, true, o.prefix, acl, box)
	mon.Store(d.mon)
	return d, nil
}
