package redlock

import (
	"strings"

	"github.com/dlock-go/dlock/internal/redislua"
)

// names are the Redis names of one lock key on every instance.
type names struct {
	lock    string // the lock: SET NX PX, value = the holder's owner ID
	counter string // the fencing counter, a decimal integer, kept forever
	channel string // release notifications, for Watch
	meta    string // "owner\ndescription" of the last hold; kept forever
	record  string // the key's record (driver.Recorder); kept until cleared
	queue   string // the line: a sorted set of waiters' members, by the score each chose
	entries string // the line's entries: member -> deadline:ttl:inbox:description
	inbox   string // the base of the waiters' inbox channels (one per Driver)
}

// names maps a user's key into this Driver's namespace. Redis keys and
// channel names are binary safe, so the key is used as is after a fixed
// prefix and a fixed-length tag: within one Prefix the mapping is
// injective, and locks, counters, channels, queues and records never collide
// ("a/b", "{", "\x00nul" and 4 KiB keys included).
//
// The names are cut from one string: one allocation instead of one per
// name, and a Lock and its Unlock make them several times.
func (d *Driver) names(key string) names {
	p := d.cfg.Prefix
	tags := [...]string{"l:", "t:", "r:", "m:", "c:", "w:", "e:"}
	var b strings.Builder
	b.Grow(len(tags)*(len(p)+2+len(key)) + len(p) + 1)
	var ends [len(tags) + 1]int
	for i, t := range tags {
		b.WriteString(p)
		b.WriteString(t)
		b.WriteString(key)
		ends[i] = b.Len()
	}
	b.WriteString(p)
	b.WriteString("i")
	ends[len(tags)] = b.Len()
	all := b.String()
	name := func(i int) string {
		start := 0
		if i > 0 {
			start = ends[i-1]
		}
		return all[start:ends[i]]
	}
	return names{lock: name(0), counter: name(1), channel: name(2), meta: name(3), record: name(4),
		queue: name(5), entries: name(6), inbox: name(7)}
}

// queueKeys are n for redislua's queue-aware release and inspect scripts.
func (n names) queueKeys() redislua.QueueKeys {
	return redislua.QueueKeys{Lock: n.lock, Fence: n.counter, Meta: n.meta, Queue: n.queue, Deadlines: n.entries, Channel: n.channel, Inbox: n.inbox, Sorted: true}
}
