package redislua

import (
	"context"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"
)

// Call is one script call as the command EVALSHA sends: "evalsha", the
// script's SHA, the number of keys, the keys, then the arguments. go-redis's
// Script.Run builds that line anew for each call and boxes every key and
// argument into it (an allocation each); a Call is built from values boxed
// once (QueueHold), so a hold's calls box only what changes between them.
type Call struct {
	script *goredis.Script
	line   []any
}

// newCall starts the line of a call of s with nkeys keys and room for n
// keys and arguments in all.
func newCall(s *goredis.Script, sha any, nkeys, n int) Call {
	line := make([]any, 3, 3+n)
	line[0], line[1], line[2] = "evalsha", sha, nkeys
	return Call{script: s, line: line}
}

// Keys returns the call's keys.
func (c Call) Keys() []any { return c.line[3 : 3+c.line[2].(int)] }

// Args returns the call's arguments.
func (c Call) Args() []any { return c.line[3+c.line[2].(int):] }

// Line returns the call's EVALSHA command line. It is shared, not copied:
// a caller that sends it on several connections must not change it.
func (c Call) Line() []any { return c.line }

// Runner is what a Call runs on: a go-redis client or connection.
type Runner interface {
	goredis.Scripter
	Process(ctx context.Context, cmd goredis.Cmder) error
}

// Run sends the call on r. When the server does not have the script
// (NOSCRIPT: a restart, a failover, SCRIPT FLUSH), it loads it and sends
// the call again, as Script.Run falls back to EVAL.
func (c Call) Run(ctx context.Context, r Runner) *goredis.Cmd {
	cmd := goredis.NewCmd(ctx, c.line...)
	_ = r.Process(ctx, cmd)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := c.script.Load(ctx, r).Err(); err != nil {
			return cmd
		}
		cmd = goredis.NewCmd(ctx, c.line...)
		_ = r.Process(ctx, cmd)
	}
	return cmd
}

// QueueSite is how a client's waiters are told of a grant and of a release
// (publish, inbox and message, as for QueueCall and ReleaseQueueCall),
// boxed once for all its calls.
type QueueSite struct {
	publish, inbox, message any
	lease                   atomic.Pointer[boxedMillis] // the last lease boxed: a client's leases are mostly one
}

// boxedMillis is a lease in ms, and the same boxed.
type boxedMillis struct {
	ms  int64
	box any
}

// leaseArg returns ms boxed, reusing the last lease boxed when it is the
// same.
func (s *QueueSite) leaseArg(ms int64) any {
	if b := s.lease.Load(); b != nil && b.ms == ms {
		return b.box
	}
	b := &boxedMillis{ms: ms, box: ms}
	s.lease.Store(b)
	return b.box
}

// NewQueueSite boxes publish, inbox and message.
func NewQueueSite(publish, inbox, message string) *QueueSite {
	return &QueueSite{publish: publish, inbox: inbox, message: message}
}

// QueueHold is what every Queue and Release call of one owner on one lock
// repeats (the key names, the owner, the lease, the site), boxed once for
// all of them.
type QueueHold struct {
	lock, fence, meta, queue, deadlines, channel any
	owner, ttlMs                                 any
	site                                         *QueueSite
}

// Lock returns the name of h's lock key.
func (h *QueueHold) Lock() string { s, _ := h.lock.(string); return s }

// Channel returns the name of h's release channel.
func (h *QueueHold) Channel() string { s, _ := h.channel.(string); return s }

// Owner returns h's owner.
func (h *QueueHold) Owner() string { s, _ := h.owner.(string); return s }

// NewQueueHold boxes what the calls of owner on k with leases of ttlMs
// from site repeat.
func NewQueueHold(site *QueueSite, k QueueKeys, owner string, ttlMs int64) *QueueHold {
	h := new(QueueHold)
	h.Set(site, k, owner, ttlMs)
	return h
}

// Set is NewQueueHold on a QueueHold the caller keeps inside a value of its
// own (one allocation fewer).
func (h *QueueHold) Set(site *QueueSite, k QueueKeys, owner string, ttlMs int64) {
	*h = QueueHold{lock: k.Lock, fence: k.Fence, meta: k.Meta, queue: k.Queue, deadlines: k.Deadlines, channel: k.Channel,
		owner: owner, ttlMs: site.leaseArg(ttlMs), site: site}
}

// The SHAs of the scripts called through QueueHold, boxed once.
var (
	queueSHA   any = Queue.Hash()
	releaseSHA any = Release.Hash()
)

// QueueCall returns h's call of Queue. With join, an owner that is not
// granted the lock joins the queue (or refreshes its entry's deadline to
// a lease from now) and is woken on InboxChannel(k.Channel, inbox);
// publish wakes a waiter that stands first once a dead one before it was
// dropped. attempt names this attempt in the entry it refreshes, and so in
// a grant that follows it (letters and digits).
func QueueCall(h *QueueHold, meta string, join bool, attempt string) Call {
	var mode any = QueueTry // a constant boxed without an allocation
	if join {
		mode = QueueJoin
	}
	c := newCall(Queue, queueSHA, 6, 13)
	c.line = append(c.line, h.lock, h.fence, h.meta, h.queue, h.deadlines, h.channel,
		h.owner, h.ttlMs, meta, mode, h.site.publish, h.site.inbox, attempt)
	return c
}

// ReleaseQueueCall returns h's call of Release for a lock with a queue: the
// owner's queue entry is removed too, and the first live waiter (or, with
// nobody queued, the site's message) is announced with publish; with grant, the lock
// is handed to that waiter and the message is
// "owner:token:elapsed:attempt". With heard (and publish), only a waiter
// that hears the announcement is granted the lock or woken: one whose
// inbox has no subscriber on this server is dropped from the queue (a
// grant to it undone) and the next live one is tried. heard is for
// waiters that subscribe on the server that runs the script (standalone,
// Sentinel's primary, a Cluster slot's master with sharded pub/sub), where
// PUBLISH's count of receivers says whether the waiter can hear.
func ReleaseQueueCall(h *QueueHold, grant, heard bool) Call {
	var mode, only any = "", "" // constants boxed without an allocation
	if grant {
		mode = Grant
	}
	if heard {
		only = Heard
	}
	c := newCall(Release, releaseSHA, 6, 13)
	c.line = append(c.line, h.lock, h.channel, h.queue, h.deadlines, h.fence, h.meta,
		h.owner, h.site.publish, h.site.message, mode, "", "", only)
	return c
}

// ScriptCall returns the call of s with keys and args, boxing each key:
// for calls made once (a renewal, a record), where nothing is saved by
// boxing ahead.
func ScriptCall(s *goredis.Script, keys []string, args []any) Call {
	c := newCall(s, s.Hash(), len(keys), len(keys)+len(args))
	for _, k := range keys {
		c.line = append(c.line, k)
	}
	c.line = append(c.line, args...)
	return c
}
