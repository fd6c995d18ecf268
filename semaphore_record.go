package dlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// A semaphore's number of permits is kept in its key's record
// (driver.Recorder), written by the first client that acquires and read by
// every other before it takes a permit: "permits=N".

func recordValue(n int) string { return "permits=" + strconv.Itoa(n) }

// recorder returns l as dlock's own Locker and its backend's Recorder; a
// nil Recorder when l is not dlock's own Locker or its driver keeps no
// records (a third-party driver).
func recorder(l Locker) (*locker, driver.Recorder) {
	pl, ok := l.(*locker)
	if !ok {
		return nil, nil
	}
	r, _ := pl.drv.(driver.Recorder)
	return pl, r
}

// checkRecord makes sure the key's record says this Semaphore's N, writing
// it if the key has none. It reads the record at every acquire, so that a
// client of the old number started after a ResetSemaphore is refused once
// the new number is recorded, not trusted from an earlier read.
func (s *Semaphore) checkRecord(ctx context.Context) error {
	pl, rec := recorder(s.l)
	if rec == nil {
		return nil // the check of the other permits' descriptions remains
	}
	if err := pl.checkOpen(); err != nil {
		return err
	}
	want := recordValue(s.n)
	got, err := rec.Record(ctx, s.key, want)
	if err != nil {
		return fmt.Errorf("reading the number of permits: %w", classify(ctx, err, false))
	}
	if got != want {
		return fmt.Errorf("%w: the semaphore is recorded with %s, this client uses %d permits (every client of a key must use one number; ResetSemaphore changes it once no client of the other number runs)", ErrInvalidOption, describeRecord(got), s.n)
	}
	return nil
}

func describeRecord(v string) string {
	if n, err := strconv.Atoi(strings.TrimPrefix(v, "permits=")); err == nil && strings.HasPrefix(v, "permits=") {
		return strconv.Itoa(n) + " permits"
	}
	return strconv.Quote(v)
}

// ResetSemaphore deletes the record that the semaphore key has permits
// permits, so that clients with another number may use the key, and
// reports whether there was such a record. It refuses, with an error
// matching ErrNotAcquired, while one of the key's first permits permit
// slots is held: reset a semaphore only when no client of the old number
// runs (one that starts meanwhile writes the old number again, and then
// the new clients are refused, not mixed in).
func ResetSemaphore(ctx context.Context, l Locker, key string, permits int) (bool, error) {
	wrap := func(err error) error { return fmt.Errorf("dlock: reset semaphore %q: %w", key, err) }
	if l == nil {
		return false, wrap(fmt.Errorf("%w: a nil Locker", ErrInvalidOption))
	}
	if permits < 1 || permits > MaxPermits {
		return false, wrap(fmt.Errorf("%w: a semaphore has from 1 to %d permits, got %d", ErrInvalidOption, MaxPermits, permits))
	}
	if err := checkKey(key); err != nil {
		return false, wrap(err)
	}
	if err := ctx.Err(); err != nil {
		return false, wrap(err)
	}
	pl, rec := recorder(l)
	if rec == nil {
		return false, wrap(fmt.Errorf("the backend keeps no records: %w", errors.ErrUnsupported))
	}
	if err := pl.checkOpen(); err != nil {
		return false, wrap(err)
	}
	for i := 0; i < permits; i++ {
		info, err := l.Inspect(ctx, permitKey(key, i))
		if err != nil {
			return false, wrap(err)
		}
		if info.Held {
			return false, wrap(fmt.Errorf("%w: permit slot %d is held (by %q)", ErrNotAcquired, i, info.Owner))
		}
	}
	ok, err := rec.ClearRecord(ctx, key, recordValue(permits))
	if err != nil {
		return false, wrap(classify(ctx, err, false))
	}
	return ok, nil
}
