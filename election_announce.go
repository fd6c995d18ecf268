package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// A new leader's announcement: a hold on "dlock-election-leader/"+name
// whose owner description is "TERM VALUE", taken by Campaign before it
// wakes the observers, and left on the server for one TTL (or until the
// next leader's announcement replaces it). Observers read it after each
// wake, so a leader that has already resigned when an observer looks is
// still delivered: the election's leader key alone says only who leads
// now.
//
// The hold is taken through the driver, not a Mutex: nothing renews it,
// no observer hears of it, and no in-process gate keeps the next leader of
// the same Locker from replacing it.

// leaderPrefix names the key that holds the last announcement. It is not
// longer than announcePrefix, so NewElection's length check covers it.
const leaderPrefix = "dlock-election-leader/"

// announcement is "TERM VALUE", or "TERM" alone when the value is too long
// to fit beside the term (the observers then take it from the leader's own
// hold, while it lasts).
func announcement(term Token, value string) string {
	t := strconv.FormatUint(uint64(term), 10)
	if len(t)+1+len(value) > driver.MaxMetaLen {
		return t
	}
	return t + " " + value
}

// parseAnnouncement reads an announcement; ok is false for anything else
// (a key locked by something that is not an Election).
func parseAnnouncement(meta string) (term Token, value string, hasValue, ok bool) {
	t, v, hasValue := strings.Cut(meta, " ")
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil || n == 0 {
		return 0, "", false, false
	}
	return Token(n), v, hasValue, true
}

// maxPublish bounds publish's attempts: one that fails has found the key
// held by an older announcement and broken it, or found it free (it ran
// out meanwhile, or the store refuses it for a while: a Consul lock-delay
// after its last writer's session ended), so only announcers racing for
// it, or such a refusal, make another necessary.
const maxPublish = 4

// errNotAnnounced: publish could not take the announcement key. The
// leader is not announced, and observers see it only on name, while it
// leads; Campaign goes on.
var errNotAnnounced = errors.New("the announcement key could not be taken")

// publish writes the announcement of term: it replaces an older one
// (Break), and fails with an error matching ErrLockLost, saying that
// leadership has ended, if a newer one is there; with errNotAnnounced if
// the key stays refused. The hold is given back after one TTL.
func (e *Election) publish(ctx context.Context, term Token, value string, ttl time.Duration) error {
	ctx, exit, err := e.l.enter(ctx, false)
	if err != nil {
		return err
	}
	defer exit.done()
	fail := func(err error) error {
		if closedDuring(ctx) {
			return ErrClosed
		}
		return classify(ctx, err, false)
	}
	ins := e.l.drv.(driver.Inspector) // checked by NewElection
	var b [16]byte
	_, _ = rand.Read(b[:])
	req := driver.Request{Key: e.rec, TTL: ttl, Owner: hex.EncodeToString(b[:]), Meta: announcement(term, value)}
	for range maxPublish {
		h, err := e.l.drv.TryAcquire(ctx, req)
		if err == nil {
			e.retire(h, ttl)
			return nil
		}
		if !errors.Is(err, ErrNotAcquired) {
			return fail(err)
		}
		info, err := ins.Inspect(ctx, e.rec)
		if err != nil {
			return fail(err)
		}
		if !info.Held {
			continue // it ran out meanwhile, or the store refuses it
		}
		if old, _, _, ok := parseAnnouncement(info.Meta); ok && old >= term {
			return fmt.Errorf("%w: a later leader (term %d) has announced itself", ErrLockLost, old)
		}
		if _, err := ins.Break(ctx, e.rec); err != nil {
			return fail(err)
		}
	}
	return errNotAnnounced
}

// retire gives the announcement's hold back after ttl: a guarded release,
// which changes nothing if the next leader has replaced it. It runs as a
// call of the Locker, so that Close waits for it, and not at all once
// Close has begun (Close's driver.Close ends what is left: sessions,
// leases; elsewhere the hold runs out on the server).
func (e *Election) retire(h driver.Hold, ttl time.Duration) {
	time.AfterFunc(ttl, func() {
		ctx, exit, err := e.l.enter(context.Background(), true)
		if err != nil {
			return
		}
		defer exit.done()
		ctx, cancel := context.WithTimeout(ctx, closeReleaseTimeout)
		defer cancel()
		_ = e.l.drv.Release(ctx, h)
	})
}
