package etcd

import (
	"strconv"
	"strings"
)

// The namespace under a Locker's prefix P holds one queue per user key:
//
//	P + escape(key) + "/" + lease ID in hex   (value: owner ID "\n" description)
//
// escape leaves ASCII letters, digits and "-._~" alone and writes every other
// byte as %XX, so an escaped key never contains "/" and the queue prefix of
// one key is never a prefix of another key's queue: "a" and "a/b" become
// "P/a/" and "P/a%2Fb/".
//
// An entry is named after its lease, which backs at most one entry of a
// queue at a time (a shared lease backs one in each queue the Locker uses)
// and is reused by the Locker's later holds. Reusing names matters: etcd keeps
// every deleted key in its index until the next compaction, and a queue
// read walks all of them, so a fresh name per hold would make each lock
// slower than the last. The price is that an entry name alone does not
// identify a hold (etcd issue 22082); its create revision does, and every
// delete is guarded by it.

// escape maps a user key injectively onto a string without "/".
func escape(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key))
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// queue returns the etcd prefix under which key's waiters and holder queue.
func (d *drv) queue(key string) string { return d.prefix + escape(key) + "/" }

// entry returns the name of the entry lease l backs in queue q.
func entry(q string, l *lease) string { return q + strconv.FormatInt(int64(l.id), 16) }

// normPrefix turns a user-given prefix into the Locker's namespace: the
// default when empty, and always ending in "/".
func normPrefix(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}
