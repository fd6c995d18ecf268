package etcd

import "strings"

// The namespace under a Locker's prefix P holds one queue per user key:
//
//	P + escape(key) + "/" + owner
//
// escape leaves ASCII letters, digits and "-._~" alone and writes every other
// byte as %XX, so an escaped key never contains "/" and the queue prefix of
// one key is never a prefix of another key's queue: "a" and "a/b" become
// "P/a/" and "P/a%2Fb/". The entry's name ends in the hold's random owner ID,
// so no two acquire attempts ever write the same etcd key.

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
