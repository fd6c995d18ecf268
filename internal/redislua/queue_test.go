package redislua

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func queueKeys(t *testing.T, c *goredis.Client) QueueKeys {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	tag := "{dlock-redislua-test:" + hex.EncodeToString(b[:]) + "}"
	k := QueueKeys{Lock: tag + ":lock", Fence: tag + ":fence", Meta: tag + ":meta", Queue: tag + ":queue",
		Deadlines: tag + ":deadlines", Channel: tag + ":release"}
	t.Cleanup(func() { c.Del(context.Background(), k.Lock, k.Fence, k.Meta, k.Queue, k.Deadlines) })
	return k
}

func queueAttempt(t *testing.T, c *goredis.Client, k QueueKeys, owner string, ttl time.Duration, join bool) AcquireReply {
	t.Helper()
	h := NewQueueHold(NewQueueSite(Publish, "inbox"+owner, ""), k, owner, Millis(ttl))
	v, err := QueueCall(h, "meta of "+owner, join, "a"+owner[:1]).Run(context.Background(), c).Result()
	if err != nil {
		t.Fatalf("queue attempt by %s: %v", owner, err)
	}
	r, err := ParseAcquire(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func queueRelease(t *testing.T, c *goredis.Client, k QueueKeys, owner string, grant bool) bool {
	t.Helper()
	return flag(t, ReleaseQueueCall(NewQueueHold(NewQueueSite(Publish, "", "released"), k, owner, 0), grant, false).Run(context.Background(), c))
}

// tokenBy makes a token for owner in one of the three ways the scripts
// make one: acquire.lua, queue.lua, or release.lua handing the lock to a
// queued waiter.
func tokenBy(t *testing.T, c *goredis.Client, k QueueKeys, how, owner string) uint64 {
	t.Helper()
	switch how {
	case "acquire":
		r := acquire(t, c, k.Lock, k.Fence, owner, time.Minute)
		if !r.Acquired {
			t.Fatalf("acquire by %s refused", owner)
		}
		return r.Token
	case "queue":
		r := queueAttempt(t, c, k, owner, time.Minute, false)
		if !r.Acquired {
			t.Fatalf("queue attempt by %s refused", owner)
		}
		return r.Token
	}
	ctx := context.Background()
	// A placeholder holder, then owner queues and is handed the lock. The
	// placeholder's token is made with queue.lua too.
	if r := queueAttempt(t, c, k, "holder-of-"+owner, time.Minute, false); !r.Acquired {
		t.Fatalf("placeholder refused")
	}
	ps := c.Subscribe(ctx, InboxChannel(k.Channel, "inbox"+owner))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if r := queueAttempt(t, c, k, owner, time.Minute, true); r.Acquired {
		t.Fatalf("%s acquired a held lock", owner)
	}
	if !queueRelease(t, c, k, "holder-of-"+owner, true) {
		t.Fatal("placeholder's release failed")
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(msg.Payload, ":")
	if len(parts) != 4 || parts[0] != owner || parts[3] != "a"+owner[:1] {
		t.Fatalf("release published %q; want %s:token:elapsed:a%s", msg.Payload, owner, owner[:1])
	}
	tok := parts[1]
	if v := c.Get(ctx, k.Lock).Val(); v != owner {
		t.Fatalf("lock holds %q after the grant; want %s", v, owner)
	}
	n, err := strconv.ParseUint(tok, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// A retry of the waiter's attempt finds the hold and the same token.
	if r := queueAttempt(t, c, k, owner, time.Minute, true); !r.Acquired || r.Token != n {
		t.Fatalf("attempt after the grant: %+v; want acquired with token %d", r, n)
	}
	return n
}

// Every way of making a token follows the counter rules: seeded from the
// server clock, above every token issued even after the counter went back,
// one more than a counter ahead of the clock; the counter is written back.
func TestTokenRulesEveryWay(t *testing.T) {
	for _, how := range []string{"acquire", "queue", "grant"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			c := client(t)
			k := queueKeys(t, c)
			before, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			var issued []uint64
			for i := range 3 {
				owner := strings.Repeat(strconv.Itoa(i), 32)
				tok := tokenBy(t, c, k, how, owner)
				if tok < uint64(before.UnixMicro()) {
					t.Fatalf("token %d below the server clock %d µs", tok, before.UnixMicro())
				}
				for _, old := range issued {
					if tok <= old {
						t.Fatalf("token %d after %v", tok, issued)
					}
				}
				if v := c.Get(ctx, k.Fence).Val(); v != strconv.FormatUint(tok, 10) {
					t.Fatalf("counter %q; want the token %d", v, tok)
				}
				issued = append(issued, tok)
				call := ReleaseQueueCall(NewQueueHold(NewQueueSite(NoPublish, "", ""), k, owner, 0), false, false)
				if !flag(t, call.Run(ctx, c)) {
					t.Fatal("release failed")
				}
			}
			// Back to the first token: the next is still above all.
			if err := c.Set(ctx, k.Fence, issued[0], 0).Err(); err != nil {
				t.Fatal(err)
			}
			tok := tokenBy(t, c, k, how, strings.Repeat("a", 32))
			if tok <= issued[len(issued)-1] {
				t.Fatalf("token %d after the counter went back; issued %v", tok, issued)
			}
			call := ReleaseQueueCall(NewQueueHold(NewQueueSite(NoPublish, "", ""), k, strings.Repeat("a", 32), 0), false, false)
			_ = call.Run(ctx, c).Err()
			// Ahead of the clock: one more.
			now, err := c.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			ahead := uint64(now.UnixMicro()) + uint64(time.Hour/time.Microsecond)
			if err := c.Set(ctx, k.Fence, ahead, 0).Err(); err != nil {
				t.Fatal(err)
			}
			if tok := tokenBy(t, c, k, how, strings.Repeat("b", 32)); tok != ahead+1 && how != "grant" {
				t.Fatalf("token %d with the counter at %d ahead of the clock; want %d", tok, ahead, ahead+1)
			} else if how == "grant" && tok != ahead+2 { // the placeholder took ahead+1
				t.Fatalf("granted token %d with the counter at %d ahead of the clock; want %d", tok, ahead, ahead+2)
			}
		})
	}
}

// The queue: a refused attempt with join queues the owner (once), TRY
// does not; the lock is granted in queue order; a free lock is promised
// to the first live waiter, not to a newcomer; a dead entry (its deadline
// passed) is dropped; an owner that gives up leaves the queue.
func TestQueueOrderAndDeadlines(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	k := queueKeys(t, c)
	if r := queueAttempt(t, c, k, "h", time.Minute, true); !r.Acquired {
		t.Fatal("first attempt refused on a free key")
	}
	if r := queueAttempt(t, c, k, "try", time.Minute, false); r.Acquired || r.Remaining <= 0 {
		t.Fatalf("TRY on a held key: %+v", r)
	}
	if n := c.LLen(ctx, k.Queue).Val(); n != 0 {
		t.Fatalf("TRY queued: queue length %d", n)
	}
	queueAttempt(t, c, k, "dead", 50*time.Millisecond, true)
	queueAttempt(t, c, k, "w1", time.Minute, true)
	queueAttempt(t, c, k, "w2", time.Minute, true)
	queueAttempt(t, c, k, "w1", time.Minute, true) // a refresh does not queue twice
	if q := c.LRange(ctx, k.Queue, 0, -1).Val(); strings.Join(q, ",") != "dead,w1,w2" {
		t.Fatalf("queue %v; want dead,w1,w2", q)
	}
	time.Sleep(100 * time.Millisecond) // "dead" runs out
	// Released without a grant: w1 (first live) may take it, nobody else.
	if !queueRelease(t, c, k, "h", false) {
		t.Fatal("release failed")
	}
	if r := queueAttempt(t, c, k, "late", time.Minute, false); r.Acquired {
		t.Fatal("a newcomer took a lock promised to the first waiter")
	}
	if r := queueAttempt(t, c, k, "w2", time.Minute, true); r.Acquired {
		t.Fatal("the second waiter took the lock before the first")
	}
	if r := queueAttempt(t, c, k, "w1", time.Minute, true); !r.Acquired {
		t.Fatal("the first live waiter was refused a free lock")
	}
	if q := c.LRange(ctx, k.Queue, 0, -1).Val(); strings.Join(q, ",") != "w2" {
		t.Fatalf("queue %v; want w2", q)
	}
	// w2 gives up (a release of a lock it does not hold): the queue is
	// empty, and w1's release then hands the lock to nobody.
	if queueRelease(t, c, k, "w2", true) {
		t.Fatal("a waiter's leave reported a release")
	}
	if n := c.Exists(ctx, k.Queue, k.Deadlines).Val(); n != 0 {
		t.Fatalf("%d queue keys left after the last waiter left", n)
	}
	if !queueRelease(t, c, k, "w1", true) {
		t.Fatal("release failed")
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatal("lock still set with nobody queued")
	}
}

// A grant is published on the first waiter's own channel only: the other
// waiters' channels, and the key's release channel, hear nothing.
func TestGrantWakesOnlyTheFirstWaiter(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	k := queueKeys(t, c)
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 32)
	if r := queueAttempt(t, c, k, "h", time.Minute, true); !r.Acquired {
		t.Fatal("first attempt refused on a free key")
	}
	queueAttempt(t, c, k, a, time.Minute, true)
	queueAttempt(t, c, k, b, time.Minute, true)
	ps := c.Subscribe(ctx, k.Channel, InboxChannel(k.Channel, "inbox"+a), InboxChannel(k.Channel, "inbox"+b))
	defer ps.Close()
	for range 3 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !queueRelease(t, c, k, "h", true) {
		t.Fatal("release failed")
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Channel != InboxChannel(k.Channel, "inbox"+a) || !strings.HasPrefix(msg.Payload, a+":") {
		t.Fatalf("grant published %q on %s; want %s:token on the first waiter's channel", msg.Payload, msg.Channel, a)
	}
	// Nothing else was published: the next message is the PING's answer.
	if err := ps.Ping(ctx, "end"); err != nil {
		t.Fatal(err)
	}
	next, err := ps.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := next.(*goredis.Pong); !ok || p.Payload != "end" {
		t.Fatalf("after the grant, also received %#v", next)
	}
}

// A grant sets a whole lease from the grant, and tells the waiter how long
// after its last refresh the grant came, by the server's clock.
func TestGrantSetsAWholeLease(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	k := queueKeys(t, c)
	a := strings.Repeat("a", 32)
	if r := queueAttempt(t, c, k, "h", time.Minute, true); !r.Acquired {
		t.Fatal("first attempt refused on a free key")
	}
	const lease = 10 * time.Second
	if r := queueAttempt(t, c, k, a, lease, true); r.Acquired {
		t.Fatal("waiter acquired a held lock")
	}
	ps := c.Subscribe(ctx, InboxChannel(k.Channel, "inbox"+a))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	const pause = time.Second
	time.Sleep(pause)
	if !queueRelease(t, c, k, "h", true) {
		t.Fatal("release failed")
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g, ok := ParseGrant(msg.Payload)
	if !ok || g.Member != a || g.Attempt != "aa" {
		t.Fatalf("grant published %q; want %s:token:elapsed:aa (the attempt that made the last refresh)", msg.Payload, a)
	}
	if e := g.Elapsed; e < pause || e > pause+5*time.Second {
		t.Fatalf("grant says %v passed since the waiter's refresh; want about %v", e, pause)
	}
	// The entry would have run out in lease-pause; the lock lasts a lease.
	if pttl := c.PTTL(ctx, k.Lock).Val(); pttl <= lease-pause/2 || pttl > lease {
		t.Fatalf("granted lock's PTTL %v; want a whole lease (%v) from the grant", pttl, lease)
	}
}

// heardQueue sets the lock to "h" and queues members in a list, in order,
// each with a live entry (inbox "inbox" + member) of a minute's lease; the
// members in listening are subscribed to their inboxes, the others have
// nobody listening (their processes are gone). The subscription is
// returned, closed when the test ends.
func heardQueue(t *testing.T, c *goredis.Client, members, listening []string) (QueueKeys, *goredis.PubSub) {
	t.Helper()
	ctx := context.Background()
	k := queueKeys(t, c)
	if r := queueAttempt(t, c, k, "h", time.Minute, true); !r.Acquired {
		t.Fatal("first attempt refused on a free key")
	}
	for _, m := range members {
		if r := queueAttempt(t, c, k, m, time.Minute, true); r.Acquired {
			t.Fatalf("%s acquired a held lock", m)
		}
	}
	var channels []string
	for _, m := range listening {
		channels = append(channels, InboxChannel(k.Channel, "inbox"+m))
	}
	ps := c.Subscribe(ctx, channels...)
	t.Cleanup(func() { _ = ps.Close() })
	for range channels {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return k, ps
}

// receive returns the next message of ps, failing the test when none
// comes within 10 s (a message published elsewhere never comes).
func receive(t *testing.T, ps *goredis.PubSub) *goredis.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no message on the waiter's inbox: %v", err)
	}
	return msg
}

// GRANT with HEARD hands the lock only to a waiter that hears of it: the
// first two in line have nobody on their inboxes (their processes are
// gone), so they are dropped, and the third gets the lock, told by the
// usual grant; the spent tokens stay spent. Without HEARD the grant goes
// to the first, whoever listens.
func TestHeardGrantSkipsWaitersNobodyHears(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	gone1, gone2, live := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	k, ps := heardQueue(t, c, []string{gone1, gone2, live}, []string{live})
	before, err := c.Get(ctx, k.Fence).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	call := ReleaseQueueCall(NewQueueHold(NewQueueSite(Publish, "", "released"), k, "h", 0), true, true)
	if !flag(t, call.Run(ctx, c)) {
		t.Fatal("release by the holder failed")
	}
	if v := c.Get(ctx, k.Lock).Val(); v != live {
		t.Fatalf("lock is %q; want it handed to the waiter that hears (%s)", v, live)
	}
	msg := receive(t, ps)
	parts := strings.Split(msg.Payload, ":")
	if len(parts) != 4 || parts[0] != live || parts[3] != "a"+live[:1] {
		t.Fatalf("grant %q; want %s:token:elapsed:a%s", msg.Payload, live, live[:1])
	}
	if v := c.Get(ctx, k.Meta).Val(); v != live+"\nmeta of "+live {
		t.Fatalf("hold description %q; want the live waiter's", v)
	}
	tok, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil || tok <= before {
		t.Fatalf("granted token %q; want above the holder's %d", parts[1], before)
	}
	if v := c.Get(ctx, k.Fence).Val(); v != parts[1] {
		t.Fatalf("counter %q; want the granted token %s", v, parts[1])
	}
	if n := c.LLen(ctx, k.Queue).Val() + c.HLen(ctx, k.Deadlines).Val(); n != 0 {
		t.Fatalf("%d queue members or entries left; want the gone ones dropped and the live one out of line", n)
	}

	// Without HEARD, the first in line is granted the lock though nobody
	// hears it.
	k2, _ := heardQueue(t, c, []string{gone1, live}, []string{live})
	call = ReleaseQueueCall(NewQueueHold(NewQueueSite(Publish, "", "released"), k2, "h", 0), true, false)
	if !flag(t, call.Run(ctx, c)) {
		t.Fatal("release by the holder failed")
	}
	if v := c.Get(ctx, k2.Lock).Val(); v != gone1 {
		t.Fatalf("lock is %q without HEARD; want the first in line, %s", v, gone1)
	}
}

// With HEARD and nobody hearing, the lock is left free and the queue
// empty: the next attempt takes it at once.
func TestHeardGrantToNobodyFreesTheLock(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	gone1, gone2 := strings.Repeat("a", 32), strings.Repeat("b", 32)
	k, _ := heardQueue(t, c, []string{gone1, gone2}, nil)
	call := ReleaseQueueCall(NewQueueHold(NewQueueSite(Publish, "", "released"), k, "h", 0), true, true)
	if !flag(t, call.Run(ctx, c)) {
		t.Fatal("release by the holder failed")
	}
	if n := c.Exists(ctx, k.Lock, k.Queue, k.Deadlines).Val(); n != 0 {
		t.Fatalf("lock %q and %d queue entries left; want the lock free and the queue empty",
			c.Get(ctx, k.Lock).Val(), c.HLen(ctx, k.Deadlines).Val())
	}
	if r := queueAttempt(t, c, k, "n", time.Minute, false); !r.Acquired {
		t.Fatal("an attempt after the release was refused")
	}
}

// A wake (no grant) with HEARD goes to the first waiter that hears it,
// dropping the ones nobody hears; the lock is left free for it.
func TestHeardWakeSkipsWaitersNobodyHears(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	gone, live, next := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	k, ps := heardQueue(t, c, []string{gone, live, next}, []string{live, next})
	call := ReleaseQueueCall(NewQueueHold(NewQueueSite(Publish, "", "released"), k, "h", 0), false, true)
	if !flag(t, call.Run(ctx, c)) {
		t.Fatal("release by the holder failed")
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatalf("lock %q after a wake; want it free", c.Get(ctx, k.Lock).Val())
	}
	if q := c.LRange(ctx, k.Queue, 0, -1).Val(); strings.Join(q, ",") != live+","+next {
		t.Fatalf("queue %v; want the gone waiter dropped, the others in line", q)
	}
	if msg := receive(t, ps); msg.Payload != live || msg.Channel != InboxChannel(k.Channel, "inbox"+live) {
		t.Fatalf("woke %q on %s; want %s on its inbox", msg.Payload, msg.Channel, live)
	}
	if r := queueAttempt(t, c, k, live, time.Minute, true); !r.Acquired {
		t.Fatal("the woken waiter was refused the free lock")
	}
}

// handoffQueue sets the lock to holder and puts members in a sorted queue,
// in order, each with an entry of the given lease (and inbox "inbox" +
// member) that lives a minute.
func handoffQueue(t *testing.T, c *goredis.Client, holder string, lease time.Duration, members ...string) QueueKeys {
	t.Helper()
	ctx := context.Background()
	k := queueKeys(t, c)
	k.Sorted = true
	if err := c.Set(ctx, k.Lock, holder, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	deadline := now.Add(time.Minute).UnixMilli()
	for i, m := range members {
		entry := strconv.FormatInt(deadline, 10) + ":" + strconv.FormatInt(Millis(lease), 10) + ":inbox" + m + ":a" + m + ":meta of " + m
		if err := c.HSet(ctx, k.Deadlines, m, entry).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ZAdd(ctx, k.Queue, goredis.Z{Score: float64(i + 1), Member: m}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// HANDOFF grants the lock only to a waiter that hears of it: the first in
// line has nobody on its inbox (its process is gone), so its grant is
// undone (the token it was given stays spent: the floor) and the next one
// gets the lock, with the next token and a whole lease.
func TestHandoffSkipsAWaiterNobodyHears(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	const lease = 10 * time.Second
	k := handoffQueue(t, c, "h", lease, "gone", "live")
	ps := c.Subscribe(ctx, InboxChannel(k.Channel, "inboxlive"))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	const floor = "9000000000000000" // above any clock in µs
	keys, args := ReleaseHandoffArgs(k, "h", Publish, "released", floor)
	if !flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release by the holder failed")
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const next = "9000000000000001"
	if parts := strings.Split(msg.Payload, ":"); len(parts) != 4 || parts[0] != "live" || parts[1] != next || parts[3] != "alive" {
		t.Fatalf("grant %q; want live:%s:elapsed:alive (the attempt named in the entry)", msg.Payload, next)
	}
	if v := c.Get(ctx, k.Lock).Val(); v != "live" {
		t.Fatalf("lock is %q; want it handed to the waiter that hears", v)
	}
	if pttl := c.PTTL(ctx, k.Lock).Val(); pttl <= lease-time.Second || pttl > lease {
		t.Fatalf("handed lock's PTTL %v; want a whole lease (%v)", pttl, lease)
	}
	if v := c.Get(ctx, k.Fence).Val(); v != next {
		t.Fatalf("counter %q; want %s", v, next)
	}
	if v := c.Get(ctx, k.Meta).Val(); v != "live\nmeta of live" {
		t.Fatalf("hold description %q; want the waiter's", v)
	}
	if n := c.ZCard(ctx, k.Queue).Val() + c.HLen(ctx, k.Deadlines).Val(); n != 0 {
		t.Fatalf("%d queue members or entries left; want the gone one dropped and the live one out of line", n)
	}

	// A counter ahead of the floor still goes up by one.
	keys, args = ReleaseHandoffArgs(k, "live", Publish, "released", "5")
	c.ZAdd(ctx, k.Queue, goredis.Z{Score: 1, Member: "live2"})
	c.HSet(ctx, k.Deadlines, "live2", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)+":10000:inboxlive:a2:")
	if !flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release by the waiter that was handed the lock failed")
	}
	if v := c.Get(ctx, k.Fence).Val(); v != "9000000000000002" {
		t.Fatalf("counter %q after a second grant; want %s + 1", v, next)
	}
}

// An entry that names no attempt is not granted: the waiter could not
// tell which refresh the grant's elapsed time counts from. It is woken.
func TestHandoffWithoutAttemptOnlyWakes(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	k := handoffQueue(t, c, "h", 10*time.Second)
	c.ZAdd(ctx, k.Queue, goredis.Z{Score: 1, Member: "w"})
	c.HSet(ctx, k.Deadlines, "w", strconv.FormatInt(time.Now().Add(time.Minute).UnixMilli(), 10)+":10000:inboxw:")
	ps := c.Subscribe(ctx, InboxChannel(k.Channel, "inboxw"))
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	keys, args := ReleaseHandoffArgs(k, "h", Publish, "released", "")
	if !flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release by the holder failed")
	}
	msg, err := ps.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != "w h" {
		t.Fatalf("message %q; want the wake \"w h\"", msg.Payload)
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatalf("lock %q; want it free", c.Get(ctx, k.Lock).Val())
	}
}

// Without an announcement HANDOFF grants nothing: nobody would know.
func TestHandoffNeedsAnAnnouncement(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	k := handoffQueue(t, c, "h", 10*time.Second, "w")
	keys, args := ReleaseHandoffArgs(k, "h", NoPublish, "released", "")
	if !flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release by the holder failed")
	}
	if n := c.Exists(ctx, k.Lock).Val(); n != 0 {
		t.Fatalf("lock still set (%q) after a release without announcement", c.Get(ctx, k.Lock).Val())
	}
	if m := c.ZRange(ctx, k.Queue, 0, -1).Val(); len(m) != 1 || m[0] != "w" {
		t.Fatalf("queue %v; want the waiter still in line", m)
	}
}
