package redlock

import "github.com/dlock-go/dlock/internal/redislua"

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
// The names are cut from one string (redislua.CutNames): a Lock and its
// Unlock make them several times.
func (d *Driver) names(key string) names {
	p := d.cfg.Prefix
	var out [8]string
	redislua.CutNames(out[:], [][3]string{{p, "l:", key}, {p, "t:", key}, {p, "r:", key}, {p, "m:", key},
		{p, "c:", key}, {p, "w:", key}, {p, "e:", key}, {p, "i"}})
	return names{lock: out[0], counter: out[1], channel: out[2], meta: out[3], record: out[4],
		queue: out[5], entries: out[6], inbox: out[7]}
}

// queueKeys are n for redislua's queue-aware release and inspect scripts.
func (n names) queueKeys() redislua.QueueKeys {
	return redislua.QueueKeys{Lock: n.lock, Fence: n.counter, Meta: n.meta, Queue: n.queue, Deadlines: n.entries, Channel: n.channel, Inbox: n.inbox, Sorted: true}
}
