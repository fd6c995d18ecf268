// Package redislua holds the Lua scripts dlock runs on a Redis instance:
// acquire with a fencing token, compare-and-delete release, and
// compare-and-expire renew (renewmany: of many keys in one call), inspect
// (optionally break), queue: an acquire that grants the lock in the order
// waiters queued for it, record/clearrecord: a write-once value per key
// (driver.Recorder) and its compare-and-delete, and Redlock's per-instance
// acquire and fence. Each script is a .lua file next to this one whose
// header lists its KEYS, ARGV and replies; the fencing token rule is one
// fragment, token.lua, included where a token is made (a line
// "-- #include token.lua", expanded when the embedded scripts are loaded).
// The scripts run through go-redis Script, which sends EVALSHA (the SHA of
// the composed text) and falls back to EVAL when the server answers
// NOSCRIPT, or as a Call (call.go): the same EVALSHA, built from values
// boxed once for all the calls of a hold, and the script loaded when the
// server answers NOSCRIPT. ParseGrant reads the message release.lua publishes when it
// grants a lock.
//
// The scripts know nothing of dlock's key names: callers pass the keys
// (which must share one hash slot on a Cluster), the owner and the lease.
// They are shared by the redis backend (one instance, standalone, Sentinel
// or Cluster) and the redlock backend (on each of its instances).
package redislua

import (
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// sources are the scripts and the fragments they include.
//
//go:embed *.lua
var sources embed.FS

// includeMarker starts a line of a script that is replaced by the named
// file of sources, a fragment (Lua in Redis has no include): the token
// rule, token.lua, is written once for every script that makes a token.
const includeMarker = "-- #include "

// compose returns the script in file name with its include lines replaced
// by the files they name. The script's SHA, which EVALSHA sends, is that
// of the composed text.
func compose(name string) string {
	b, err := sources.ReadFile(name)
	if err != nil {
		panic("redislua: " + err.Error())
	}
	var out strings.Builder
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if inc, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), includeMarker); ok {
			out.WriteString(compose(inc))
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

// script returns the composed script in file name.
func script(name string) *goredis.Script { return goredis.NewScript(compose(name)) }

// The scripts. Each .lua file's header lists its KEYS, ARGV and replies;
// the functions named here build the KEYS and ARGV (a test holds them to
// the headers).
var (
	// Acquire (AcquireArgs, AcquireMetaArgs): KEYS lock, fence [, meta];
	// ARGV owner, ttl-ms [, description]. Replies {1, token}, {1, token,
	// left} (already the owner's) or {0, pttl}; error NOTALOCK.
	Acquire = script("acquire.lua")
	// Release (ReleaseArgs, ReleaseQueueArgs, ReleaseHandoffArgs): KEYS
	// lock [, channel [, queue, entries, fence, meta [, inbox base]]];
	// ARGV owner, publish command, message [, GRANT, '' or HANDOFF
	// [, SORTED [, floor [, HEARD]]]]. Replies 1 or 0; a grant is
	// published as "member:token:elapsed:attempt" (ParseGrant).
	Release = script("release.lua")
	// Renew (RenewArgs): KEYS lock; ARGV owner, ttl-ms. Replies 1 or 0.
	Renew = script("renew.lua")
	// RenewMany (RenewManyArgs): KEYS lock...; ARGV ttl-ms, then the owner
	// of each key. Replies the keys not extended, as pairs of the key's
	// index and Renew's reply for it, 0 or an error (ParseRenewMany). Its
	// keys are locks of different slots: for a standalone instance (each of
	// Redlock's), not a Cluster.
	RenewMany = script("renewmany.lua")
	// Inspect (InspectArgs, InspectQueueArgs): KEYS lock, fence, meta
	// [, channel [, queue, entries [, inbox base]]]; ARGV '' or BREAK,
	// publish command, message. Replies {0, counter} or {1, pttl, counter,
	// meta, owner}, with the queue keys one more element (the live
	// waiters); error NOTALOCK.
	Inspect = script("inspect.lua")
	// Queue (QueueArgs): KEYS lock, fence, meta, queue, entries, channel;
	// ARGV owner, ttl-ms, meta, QueueJoin or QueueTry, publish command,
	// inbox, attempt. Replies {1, token}, {1, token, left} (already the
	// owner's) or {0, wait-ms}; error NOTALOCK.
	Queue = script("queue.lua")
	// Record (RecordArgs): KEYS record; ARGV value. Writes value when the
	// record is absent and replies the record (a bulk string); error
	// WRONGTYPE.
	Record = script("record.lua")
	// ClearRecord (RecordArgs): KEYS record; ARGV value. Deletes the
	// record if it is value. Replies 1 or 0; error WRONGTYPE.
	ClearRecord = script("clearrecord.lua")
	// RedlockAcquire: phase 1 of a Redlock acquire on one of its
	// instances (RedlockAcquireArgs). Replies {1, counter} or {0, pttl,
	// holder}, the counter a decimal string; error NOTALOCK.
	RedlockAcquire = script("redlockacquire.lua")
	// Fence: phase 2 of a Redlock token, raising one instance's counter
	// to the token while the lock there is the owner's (FenceArgs).
	// Replies 1 or 0.
	Fence = script("fence.lua")
)

// RedlockWaiter is a Redlock acquire's waiting member, which joins the
// line (or refreshes its entry there) when it is refused.
type RedlockWaiter struct {
	Member  string
	Inbox   string // the inbox its grants and wakes are published on
	Attempt string // the attempt's ID, letters and digits
	Score   int64  // its place in the line, the same on every instance
}

// RedlockAcquireArgs returns RedlockAcquire's keys and arguments: the
// lock, its counter, the hold metadata key (desc the holder's
// description), the line and its entries; floor is the least counter to
// make (decimal µs); w, when not nil, waits in the line.
func RedlockAcquireArgs(lock, counter, meta, line, entries, owner string, ttlMs int64, desc, floor string, w *RedlockWaiter) ([]string, []any) {
	args := []any{owner, ttlMs, desc, "", "", 0, floor, 0}
	if w != nil {
		args[3], args[4], args[5], args[7] = w.Member, w.Inbox, w.Attempt, w.Score
	}
	return []string{lock, counter, meta, line, entries}, args
}

// FenceArgs returns Fence's keys and arguments: raise counter to token
// while lock is owner's.
func FenceArgs(lock, counter, owner string, token uint64) ([]string, []any) {
	return []string{lock, counter}, []any{owner, strconv.FormatUint(token, 10)}
}

// Queue's ARGV[4]: join the queue when the lock is not granted, or not.
const (
	QueueJoin = "QUEUE"
	QueueTry  = "TRY"
)

// QueueKeys are the names of one lock's keys for Queue, and for Release
// and Inspect with a queue. All share one hash slot on a Cluster.
type QueueKeys struct {
	Lock, Fence, Meta, Queue, Deadlines, Channel string
	// Inbox, when set, is the base of the waiters' inbox channels instead
	// of Channel (Release and Inspect only): one inbox channel per waiter's
	// process, whatever the key.
	Inbox string
	// Sorted, when set, says Queue is a sorted set, first in line the
	// lowest score, instead of a list (ReleaseHandoffArgs only; Inspect reads
	// either).
	Sorted bool
}

// inboxKey appends k.Inbox, when set, to keys.
func (k QueueKeys) inboxKey(keys []string) []string {
	if k.Inbox != "" {
		keys = append(keys, k.Inbox)
	}
	return keys
}

// InboxChannel is the channel a queued waiter with inbox is woken on: the
// release channel's name (so the same hash slot) and ":inbox". An inbox is
// letters and digits.
func InboxChannel(channel, inbox string) string { return channel + ":" + inbox }

// Grant is Release's ARGV[4] that hands a freed lock to the first live
// waiter.
const Grant = "GRANT"

// Heard is Release's ARGV[7] that grants (or wakes) only a waiter that
// hears of it, as Handoff does, with Grant's messages.
const Heard = "HEARD"

// Handoff is Release's ARGV[4] that grants a freed lock, as Grant does, to
// the first live waiter whose inbox has a subscriber on this server: a
// grant nobody hears is undone and the next waiter is tried.
const Handoff = "HANDOFF"

// ReleaseHandoffArgs returns Release's keys and arguments for a lock whose
// queue hands it over (mode Handoff): the owner's queue entry is removed
// too, and with publish the lock goes to the first waiter with a
// subscribed inbox, told by "member:token:elapsed", the token at least
// floor (decimal, or "" for none). Without publish the lock is only
// released.
func ReleaseHandoffArgs(k QueueKeys, owner, publish, message, floor string) ([]string, []any) {
	sorted := ""
	if k.Sorted {
		sorted = Sorted
	}
	return k.inboxKey([]string{k.Lock, k.Channel, k.Queue, k.Deadlines, k.Fence, k.Meta}), []any{owner, publish, message, Handoff, sorted, floor}
}

// Sorted is Release's ARGV[5] for a queue kept as a sorted set.
const Sorted = "SORTED"

// InspectQueueArgs returns Inspect's keys and arguments for a lock with a
// queue: the reply counts its live waiters, and a break wakes the first.
func InspectQueueArgs(k QueueKeys, brk bool, publish, message string) ([]string, []any) {
	keys, args := InspectArgs(k.Lock, k.Fence, k.Meta, k.Channel, brk, publish, message)
	return k.inboxKey(append(keys, k.Queue, k.Deadlines)), args
}

// Announcement commands for Release's ARGV[2].
const (
	NoPublish      = ""
	Publish        = "PUBLISH"
	ShardedPublish = "SPUBLISH"
)

// NotALockPrefix starts the error reply of Acquire when a key holds a value
// that is not a lock (or a counter that is not an integer).
const NotALockPrefix = "NOTALOCK"

// Millis turns a lease into the whole milliseconds Redis takes, rounding up
// so the server never grants less than asked for.
func Millis(ttl time.Duration) int64 {
	ms := int64((ttl + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}

// AcquireArgs returns Acquire's keys and arguments.
func AcquireArgs(lockKey, fenceKey, owner string, ttlMs int64) ([]string, []any) {
	return []string{lockKey, fenceKey}, []any{owner, ttlMs}
}

// AcquireMetaArgs returns Acquire's keys and arguments for a hold that
// stores its description (meta) in metaKey, for Inspect.
func AcquireMetaArgs(lockKey, fenceKey, metaKey, owner string, ttlMs int64, meta string) ([]string, []any) {
	return []string{lockKey, fenceKey, metaKey}, []any{owner, ttlMs, meta}
}

// Break is Inspect's ARGV[1] that removes the hold.
const Break = "BREAK"

// InspectArgs returns Inspect's keys and arguments: with brk, the hold is
// removed and the release announced on channel (when not empty) with
// publish.
func InspectArgs(lockKey, fenceKey, metaKey, channel string, brk bool, publish, message string) ([]string, []any) {
	keys := []string{lockKey, fenceKey, metaKey}
	if channel != "" {
		keys = append(keys, channel)
	}
	mode := ""
	if brk {
		mode = Break
	}
	return keys, []any{mode, publish, message}
}

// InspectReply is Inspect's decoded reply.
type InspectReply struct {
	Held      bool
	Remaining time.Duration
	Counter   uint64 // the fencing counter (on one instance: the holder's token); also when free
	Meta      string
	Owner     string
	Waiters   int // live queue entries (with InspectQueueArgs); -1 without a queue
}

// ParseInspect decodes the result of Inspect.
func ParseInspect(v any) (InspectReply, error) {
	s, ok := v.([]any)
	waiters := -1
	if ok && (len(s) == 3 || len(s) == 6) {
		n, ok2 := s[len(s)-1].(int64)
		if !ok2 || n < 0 {
			return InspectReply{}, fmt.Errorf("redislua: unexpected inspect reply %#v", v)
		}
		waiters = int(n)
		s = s[:len(s)-1]
	}
	if ok && len(s) == 2 && s[0] == int64(0) {
		n, err := parseCounter(s[1])
		return InspectReply{Counter: n, Waiters: waiters}, err
	}
	if !ok || len(s) != 5 || s[0] != int64(1) {
		return InspectReply{}, fmt.Errorf("redislua: unexpected inspect reply %#v", v)
	}
	pttl, ok1 := s[1].(int64)
	meta, ok3 := s[3].(string)
	owner, ok4 := s[4].(string)
	if !ok1 || !ok3 || !ok4 || pttl < 0 {
		return InspectReply{}, fmt.Errorf("redislua: unexpected inspect reply %#v", v)
	}
	n, err := parseCounter(s[2])
	if err != nil {
		return InspectReply{}, err
	}
	// PTTL rounds down: a live lease is never reported as 0 ("unknown").
	rem := max(time.Duration(pttl)*time.Millisecond, time.Millisecond)
	return InspectReply{Held: true, Remaining: rem, Counter: n, Meta: meta, Owner: owner, Waiters: waiters}, nil
}

func parseCounter(v any) (uint64, error) {
	s, _ := v.(string)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("redislua: fencing counter %#v is not an integer", v)
	}
	return n, nil
}

// ReleaseArgs returns Release's keys and arguments. channel and publish may
// be empty for a release that announces nothing.
func ReleaseArgs(lockKey, channel, owner, publish, message string) ([]string, []any) {
	keys := []string{lockKey}
	if channel != "" {
		keys = append(keys, channel)
	}
	return keys, []any{owner, publish, message}
}

// RenewArgs returns Renew's keys and arguments.
func RenewArgs(lockKey, owner string, ttlMs int64) ([]string, []any) {
	return []string{lockKey}, []any{owner, ttlMs}
}

// RenewManyArgs returns RenewMany's keys and arguments: the lock keys,
// each with its owner (owners[i] is the owner of keys[i]), all extended to
// the same lease.
func RenewManyArgs(keys, owners []string, ttlMs int64) ([]string, []any) {
	as := make([]any, 0, 1+len(owners))
	as = append(as, ttlMs)
	for _, o := range owners {
		as = append(as, o)
	}
	return keys, as
}

// renewed is Renew's reply for a key RenewMany extended.
var renewed any = int64(1)

// ParseRenewMany turns RenewMany's reply for n keys into one (reply,
// error) per key, each as Renew alone would have answered: 1 for a key
// the reply does not list, else the 0 or the error it lists. A reply in
// an unexpected shape is an error.
func ParseRenewMany(v any, n int) ([]any, []error, error) {
	s, ok := v.([]any)
	if !ok || len(s)%2 != 0 || len(s) > 2*n {
		return nil, nil, fmt.Errorf("redislua: unexpected renew-many reply of %T for %d keys", v, n)
	}
	vals, errs := make([]any, n), make([]error, n)
	for i := range vals {
		vals[i] = renewed
	}
	for j := 0; j < len(s); j += 2 {
		i, ok := s[j].(int64)
		if !ok || i < 1 || i > int64(n) {
			return nil, nil, fmt.Errorf("redislua: renew-many reply names key %v of %d", s[j], n)
		}
		if err, ok := s[j+1].(error); ok {
			vals[i-1], errs[i-1] = nil, err
			continue
		}
		vals[i-1] = s[j+1]
	}
	return vals, errs, nil
}

// AcquireReply is Acquire's decoded reply.
type AcquireReply struct {
	Acquired  bool
	Token     uint64        // when Acquired
	Remaining time.Duration // when not Acquired: the holder's remaining lease
	// Existing, when Acquired, says the owner held the lock before the
	// script ran (a release granted it, or the attempt is a retry of one
	// that took it); Remaining is then what its lease had left.
	Existing bool
}

// ParseAcquire decodes the result of Acquire. A reply in an unexpected
// shape is an error (it means the script on the server is not ours).
func ParseAcquire(v any) (AcquireReply, error) {
	s, ok := v.([]any)
	if !ok || len(s) != 2 && len(s) != 3 {
		return AcquireReply{}, fmt.Errorf("redislua: unexpected acquire reply %#v", v)
	}
	flag, ok1 := s[0].(int64)
	n, ok2 := s[1].(int64)
	if !ok1 || !ok2 || n < 0 {
		return AcquireReply{}, fmt.Errorf("redislua: unexpected acquire reply %#v", v)
	}
	if flag == 1 {
		if n == 0 {
			return AcquireReply{}, errors.New("redislua: acquire returned token 0")
		}
		r := AcquireReply{Acquired: true, Token: uint64(n)}
		if len(s) == 3 {
			left, ok := s[2].(int64)
			if !ok || left < 0 {
				return AcquireReply{}, fmt.Errorf("redislua: unexpected acquire reply %#v", v)
			}
			r.Existing, r.Remaining = true, time.Duration(left)*time.Millisecond
		}
		return r, nil
	}
	if len(s) != 2 {
		return AcquireReply{}, fmt.Errorf("redislua: unexpected acquire reply %#v", v)
	}
	return AcquireReply{Remaining: time.Duration(n) * time.Millisecond}, nil
}

// ParseFlag decodes the 1/0 reply of Release and Renew.
func ParseFlag(v any) (bool, error) {
	n, ok := v.(int64)
	if !ok || (n != 0 && n != 1) {
		return false, fmt.Errorf("redislua: unexpected reply %#v", v)
	}
	return n == 1, nil
}

// IsNotALock reports whether err is the server's reply that a key holds
// something other than a lock: Acquire's NOTALOCK, or WRONGTYPE from
// Release and Renew.
func IsNotALock(err error) bool {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, NotALockPrefix+" ") || strings.HasPrefix(msg, "WRONGTYPE ")
}

// RecordArgs returns Record's and ClearRecord's keys and arguments.
func RecordArgs(recordKey, value string) ([]string, []any) {
	return []string{recordKey}, []any{value}
}

// ParseRecord decodes the reply of Record: the record's value.
func ParseRecord(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("redislua: unexpected record reply %#v", v)
	}
	return s, nil
}
