package zookeeper

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dlock-go/dlock/driver"
)

// DefaultPrefix is the znode under which locks live when no path is given.
const DefaultPrefix = "/dlock"

// lockInfix separates the GUID from the sequence number in a lock node's
// name: "_c_<guid>-lock-0000000042", the name go-zookeeper's Lock and
// Curator's protected mode give their nodes too.
const (
	protectedPrefix = "_c_"
	lockInfix       = "-lock-"
)

// nodeName maps a key onto one znode name, injectively: ASCII letters,
// digits, '-' and '_' stay, every other byte (including '%', '.', '/', NUL
// and each byte of a multi-byte character) becomes %XX. Since '%' itself is
// always escaped, two keys never share a name; since '.' is escaped, no
// name is "." or ".."; since control bytes are escaped, every name is a
// valid znode name. A 4 KiB key gives a name of at most 12 KiB.
func nodeName(key string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(key) + len(key)/4)
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// cleanPrefix validates a chroot path ("/a/b"): absolute, no empty, "." or
// ".." segment, no character ZooKeeper rejects, not inside /zookeeper. A
// trailing slash is dropped; "" and "/" give DefaultPrefix.
func cleanPrefix(p string) (string, error) {
	if p == "" || p == "/" {
		return DefaultPrefix, nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: znode path %q must start with /", driver.ErrInvalidURL, p)
	}
	p = strings.TrimSuffix(p, "/")
	if !utf8.ValidString(p) {
		return "", fmt.Errorf("%w: znode path %q is not UTF-8", driver.ErrInvalidURL, p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: znode path %q has an empty, . or .. segment", driver.ErrInvalidURL, p)
		}
		for _, r := range seg {
			if r <= 0x1f || r >= 0x7f && r <= 0x9f || r >= 0xf000 && r <= 0xf8ff || r >= 0xfff0 && r <= 0xffff {
				return "", fmt.Errorf("%w: znode path %q has character %U, which ZooKeeper rejects", driver.ErrInvalidURL, p, r)
			}
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return "", fmt.Errorf("%w: znode path %q is inside ZooKeeper's reserved /zookeeper", driver.ErrInvalidURL, p)
	}
	return p, nil
}

// isOwner reports whether s is a GUID as driver.Request.Owner: 32 lower-case
// hex digits.
func isOwner(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// lockNode is one child of a key's znode that takes part in the queue.
type lockNode struct {
	name string
	seq  int64
}

// seqOf returns the sequence number ZooKeeper appended to a lock node's
// name, the digits after the last "lock-". Children without one (not made
// by a lock recipe) are not part of the queue.
func seqOf(name string) (int64, bool) {
	i := strings.LastIndex(name, "lock-")
	if i < 0 {
		return 0, false
	}
	s := name[i+len("lock-"):]
	if len(s) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// hasGUID reports whether a child name carries guid in the protected form.
func hasGUID(name, guid string) bool {
	return strings.HasPrefix(name, protectedPrefix+guid+"-")
}

// queue is a key's lock nodes in the order they were created.
//
// ZooKeeper names a sequential node after its parent's child version, a
// signed 32-bit counter printed as %010d: after 2^31 changes under one key
// node it wraps to "-2147483648" and counts up from there. Sorting the
// numbers as they read would put a wrapped node first, ahead of nodes
// created before it, and grant it the lock while an older node still holds
// it. The numbers are therefore placed on the 2^32 circle the counter runs
// around, and the queue starts after the widest gap between neighbours:
// the live nodes of one key span far fewer than 2^31 changes, so that gap
// is where the counter's newest value meets its oldest live one, wrapped
// or not. (The fencing token, the czxid, does not wrap.)
func queue(children []string) []lockNode {
	q := make([]lockNode, 0, len(children))
	for _, c := range children {
		if seq, ok := seqOf(c); ok {
			q = append(q, lockNode{name: c, seq: seq})
		}
	}
	pos := func(n lockNode) uint32 { return uint32(n.seq) } // the counter's place on the circle
	sort.Slice(q, func(i, j int) bool {
		if pi, pj := pos(q[i]), pos(q[j]); pi != pj {
			return pi < pj
		}
		return q[i].name < q[j].name
	})
	if len(q) < 2 {
		return q
	}
	// The gap from the last node round to the first, then between
	// neighbours; the queue starts after the widest.
	start, widest := 0, uint64(pos(q[0]))+1<<32-uint64(pos(q[len(q)-1]))
	for i := 1; i < len(q); i++ {
		if gap := uint64(pos(q[i]) - pos(q[i-1])); gap > widest {
			start, widest = i, gap
		}
	}
	if start == 0 {
		return q
	}
	return append(q[start:len(q):len(q)], q[:start]...)
}

// KeyPath returns the znode under which key's lock nodes live, for a
// Locker with the given prefix ("" for DefaultPrefix). Operators can list
// it to see the queue; another lock recipe on this path that uses
// "-lock-" sequence names (go-zookeeper's zk.Lock, Curator's
// InterProcessMutex) excludes dlock Mutexes on key and is served in the
// same queue.
func KeyPath(prefix, key string) (string, error) {
	p, err := cleanPrefix(prefix)
	if err != nil {
		return "", err
	}
	return p + "/" + nodeName(key), nil
}
