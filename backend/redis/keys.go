package redis

import (
	"fmt"
	"strings"

	"github.com/dlock-go/dlock/internal/redislua"
)

// DefaultPrefix is the key prefix used when none is given.
const DefaultPrefix = "dlock"

// names are the Redis keys of one lock. All share one Cluster hash slot:
// they carry the same hash tag, {prefix:escaped-key}.
type names struct {
	lock      string // the lock: value = owner, expiry = lease
	fence     string // the fencing counter; never expires
	channel   string // where releases are published
	meta      string // "owner\ndescription" of the last hold; never expires
	queue     string // list of waiting owners, first in line first
	deadlines string // hash owner -> server ms after which its queue entry is dropped
	record    string // the key's record (driver.Recorder); never expires, no lock script touches it
}

// keyNames returns key's names under prefix, cut from one string
// (redislua.CutNames): a Lock makes them every time.
func keyNames(prefix, key string) names {
	tag := "{" + prefix + ":" + escapeKey(key) + "}"
	var out [7]string
	redislua.CutNames(out[:], [][3]string{{tag, ":lock"}, {tag, ":fence"}, {tag, ":release"}, {tag, ":meta"},
		{tag, ":queue"}, {tag, ":deadlines"}, {tag, ":record"}})
	return names{lock: out[0], fence: out[1], channel: out[2], meta: out[3],
		queue: out[4], deadlines: out[5], record: out[6]}
}

// queueKeys are n for the queue-aware scripts.
func (n names) queueKeys() redislua.QueueKeys {
	return redislua.QueueKeys{Lock: n.lock, Fence: n.fence, Meta: n.meta, Queue: n.queue, Deadlines: n.deadlines, Channel: n.channel}
}

// LockKey returns the Redis key that holds the lock on key under prefix, for
// operators and tests: DEL on it breaks the lock (its holder learns at its
// next renewal). The fencing counter is the same name ending in ":fence",
// the release channel the same name ending in ":release", the holder's
// description (shown while its owner holds the lock) the same name ending
// in ":meta", the waiters' queue the same name ending in ":queue" and
// their entries' deadlines the same name ending in ":deadlines", and the
// key's record (a Semaphore's number of permits) the same name ending in
// ":record".
func LockKey(prefix, key string) string { return keyNames(prefix, key).lock }

// escapeKey maps a user key to a string without '{' or '}', injectively:
// '%', '{' and '}' are percent-encoded, every other byte is kept. A brace
// in a key can therefore never end the hash tag early, and two keys never
// share a name.
func escapeKey(key string) string {
	if !strings.ContainsAny(key, "%{}") {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// checkPrefix rejects a prefix that would break the hash tag.
func checkPrefix(prefix string) error {
	if strings.ContainsAny(prefix, "{}") {
		return fmt.Errorf("key prefix %q must not contain '{' or '}'", prefix)
	}
	return nil
}
