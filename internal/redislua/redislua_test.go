package redislua

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/dlock-go/dlock/internal/testenv"
)

func client(t *testing.T) *goredis.Client {
	t.Helper()
	o, err := goredis.ParseURL(testenv.Endpoint(t, "DLOCK_REDIS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testKeys returns names unique to this test run, deleted when it ends.
func testKeys(t *testing.T, c *goredis.Client) (lock, fence, channel string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	tag := "{dlock-redislua-test:" + hex.EncodeToString(b[:]) + "}"
	lock, fence, channel = tag+":lock", tag+":fence", tag+":release"
	t.Cleanup(func() { c.Del(context.Background(), lock, fence) })
	return lock, fence, channel
}

func acquire(t *testing.T, c goredis.Scripter, lock, fence, owner string, ttl time.Duration) AcquireReply {
	t.Helper()
	keys, args := AcquireArgs(lock, fence, owner, Millis(ttl))
	v, err := Acquire.Run(context.Background(), c, keys, args...).Result()
	if err != nil {
		t.Fatalf("acquire by %s: %v", owner, err)
	}
	r, err := ParseAcquire(v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func flag(t *testing.T, cmd *goredis.Cmd) bool {
	t.Helper()
	v, err := cmd.Result()
	if err != nil {
		t.Fatal(err)
	}
	ok, err := ParseFlag(v)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// A holder whose lease expired and was taken over can neither release nor
// renew its successor's lock; the successor's release works and is
// published.
func TestExpiredHolderCannotTouchSuccessor(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, fence, channel := testKeys(t, c)

	old := acquire(t, c, lock, fence, "old-owner", 50*time.Millisecond)
	if !old.Acquired {
		t.Fatal("first acquire failed")
	}
	time.Sleep(100 * time.Millisecond)
	next := acquire(t, c, lock, fence, "new-owner", 10*time.Second)
	if !next.Acquired {
		t.Fatal("acquire after expiry failed")
	}
	if next.Token <= old.Token {
		t.Fatalf("token %d after takeover; want > %d", next.Token, old.Token)
	}

	keys, args := ReleaseArgs(lock, channel, "old-owner", Publish, "m")
	if flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release by the expired holder reported success")
	}
	keys, args = RenewArgs(lock, "old-owner", Millis(time.Hour))
	if flag(t, Renew.Run(ctx, c, keys, args...)) {
		t.Fatal("renew by the expired holder reported success")
	}
	if v := c.Get(ctx, lock).Val(); v != "new-owner" {
		t.Fatalf("lock value %q after the old holder's release and renew; want new-owner", v)
	}
	if pttl := c.PTTL(ctx, lock).Val(); pttl <= 0 || pttl > 10*time.Second {
		t.Fatalf("PTTL %v: the old holder's renew changed the successor's lease", pttl)
	}

	sub := c.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil { // subscription confirmed
		t.Fatal(err)
	}
	keys, args = ReleaseArgs(lock, channel, "new-owner", Publish, "released")
	if !flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release by the holder failed")
	}
	if n := c.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("lock key still exists after release")
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	if err != nil || msg.Payload != "released" {
		t.Fatalf("release message: %v %v", msg, err)
	}
}

// A missing counter starts at the server clock in microseconds; later
// tokens are never below the clock either.
func TestCounterSeededFromClock(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, fence, channel := testKeys(t, c)
	before, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	first := acquire(t, c, lock, fence, "a", time.Minute)
	if !first.Acquired {
		t.Fatal("acquire failed")
	}
	if floor := uint64(before.UnixMicro()); first.Token < floor {
		t.Fatalf("first token %d; want at least the server clock %d µs", first.Token, floor)
	}
	if v, _ := c.Get(ctx, fence).Result(); v != strconv.FormatUint(first.Token, 10) {
		t.Fatalf("counter %q; want the token %d", v, first.Token)
	}
	keys, args := ReleaseArgs(lock, channel, "a", NoPublish, "")
	if !flag(t, Release.Run(ctx, c, keys, args...)) {
		t.Fatal("release failed")
	}
	before, err = c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	second := acquire(t, c, lock, fence, "b", time.Minute)
	if !second.Acquired || second.Token <= first.Token || second.Token < uint64(before.UnixMicro()) {
		t.Fatalf("second acquire %+v; want a token above %d and at least the server clock %d µs",
			second, first.Token, before.UnixMicro())
	}
	if v, _ := c.Get(ctx, fence).Result(); v != strconv.FormatUint(second.Token, 10) {
		t.Fatalf("counter %q; want the token %d", v, second.Token)
	}
}

// A counter that is present but older than tokens already issued (a
// snapshot restored, a failover to a replica that missed the last
// increments) must not make tokens repeat: the next token is above every
// token issued before, and written back.
func TestCounterBehindIssuedTokens(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, fence, channel := testKeys(t, c)
	var issued []uint64
	for i := range 4 {
		owner := "o" + strconv.Itoa(i)
		r := acquire(t, c, lock, fence, owner, time.Minute)
		if !r.Acquired {
			t.Fatalf("acquire %d failed", i)
		}
		issued = append(issued, r.Token)
		keys, args := ReleaseArgs(lock, channel, owner, NoPublish, "")
		if !flag(t, Release.Run(ctx, c, keys, args...)) {
			t.Fatal("release failed")
		}
	}
	// Back to the counter as it was after the first acquisition.
	if err := c.Set(ctx, fence, issued[0], 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := acquire(t, c, lock, fence, "after", time.Minute)
	if !r.Acquired {
		t.Fatal("acquire after the rollback failed")
	}
	for _, tok := range issued {
		if r.Token <= tok {
			t.Fatalf("token %d after the counter went back to %d; tokens issued before: %v", r.Token, issued[0], issued)
		}
	}
	if v, _ := c.Get(ctx, fence).Result(); v != strconv.FormatUint(r.Token, 10) {
		t.Fatalf("counter %q; want the token %d written back", v, r.Token)
	}
}

// A counter ahead of the server clock (raised by a client, or by a server
// whose clock was ahead) counts up by one.
func TestCounterAheadOfClock(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, fence, _ := testKeys(t, c)
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	ahead := uint64(now.UnixMicro()) + uint64(time.Hour/time.Microsecond)
	if err := c.Set(ctx, fence, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if r := acquire(t, c, lock, fence, "a", time.Minute); !r.Acquired || r.Token != ahead+1 {
		t.Fatalf("acquire %+v; want token %d", r, ahead+1)
	}
}

// Running acquire again with the same owner (a client retry) returns the
// same hold and token; another owner sees the remaining lease.
func TestAcquireRetryAndHeld(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, fence, _ := testKeys(t, c)
	a := acquire(t, c, lock, fence, "a", time.Minute)
	again := acquire(t, c, lock, fence, "a", time.Minute)
	if !again.Acquired || again.Token != a.Token {
		t.Fatalf("retry by the same owner: %+v; want acquired with token %d", again, a.Token)
	}
	b := acquire(t, c, lock, fence, "b", time.Minute)
	if b.Acquired {
		t.Fatal("a second owner acquired a held lock")
	}
	if b.Remaining <= 0 || b.Remaining > time.Minute {
		t.Fatalf("remaining lease %v; want in (0, 1m]", b.Remaining)
	}
	if v := c.Get(ctx, fence).Val(); v != strconv.FormatUint(a.Token, 10) {
		t.Fatalf("counter %q moved without a new hold; want %d", v, a.Token)
	}
}

// Values this package did not write are reported, never overwritten.
func TestNotALock(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	lock, fence, channel := testKeys(t, c)
	run := func() error {
		keys, args := AcquireArgs(lock, fence, "a", 1000)
		return Acquire.Run(ctx, c, keys, args...).Err()
	}

	c.HSet(ctx, lock, "field", "value")
	if err := run(); !IsNotALock(err) {
		t.Fatalf("acquire on a hash: %v; want NOTALOCK", err)
	}
	keys, args := ReleaseArgs(lock, channel, "a", Publish, "m")
	if err := Release.Run(ctx, c, keys, args...).Err(); !IsNotALock(err) {
		t.Fatalf("release on a hash: %v; want WRONGTYPE", err)
	}
	keys, args = RenewArgs(lock, "a", 1000)
	if err := Renew.Run(ctx, c, keys, args...).Err(); !IsNotALock(err) {
		t.Fatalf("renew on a hash: %v; want WRONGTYPE", err)
	}
	if v := c.HGet(ctx, lock, "field").Val(); v != "value" {
		t.Fatalf("hash changed: field=%q", v)
	}

	c.Del(ctx, lock)
	c.Set(ctx, lock, "someone else's value", 0)
	if err := run(); !IsNotALock(err) {
		t.Fatalf("acquire on a string without expiry: %v; want NOTALOCK", err)
	}

	c.Del(ctx, lock)
	c.HSet(ctx, fence, "field", "value")
	if err := run(); !IsNotALock(err) {
		t.Fatalf("acquire with a hash as counter: %v; want NOTALOCK", err)
	}
	if n := c.Exists(ctx, lock).Val(); n != 0 {
		t.Fatal("a failed acquire left the lock key behind")
	}
}

func TestMillis(t *testing.T) {
	for _, c := range []struct {
		in   time.Duration
		want int64
	}{
		{time.Second, 1000},
		{1500 * time.Microsecond, 2},
		{time.Nanosecond, 1},
		{0, 1},
		{10 * time.Millisecond, 10},
	} {
		if got := Millis(c.in); got != c.want {
			t.Errorf("Millis(%v) = %d; want %d", c.in, got, c.want)
		}
	}
}

func TestParseAcquireRejectsOddReplies(t *testing.T) {
	for _, v := range []any{nil, "OK", int64(1), []any{int64(1)}, []any{int64(1), int64(0)}, []any{"1", int64(5)}, []any{int64(0), int64(-1)}} {
		if _, err := ParseAcquire(v); err == nil {
			t.Errorf("ParseAcquire(%#v) accepted", v)
		}
	}
}
