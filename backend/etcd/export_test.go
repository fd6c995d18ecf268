package etcd

import (
	"net/url"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlock-go/dlock/driver"
)

// QueuePrefix is the etcd prefix of key's queue under a Locker's prefix.
func QueuePrefix(prefix, key string) string { return normPrefix(prefix) + escape(key) + "/" }

// ParseURL exposes the URL parser: client config and key prefix.
func ParseURL(u *url.URL) (clientv3.Config, string, error) { return parseURL(u) }

// Escape exposes the key escaping.
func Escape(key string) string { return escape(key) }

// NewDriver returns a driver over cli, as New's Lockers are made over,
// that closes cli when it is closed.
func NewDriver(cli *clientv3.Client, cfg Config) driver.Locker { return newDriver(cli, cfg, true) }
