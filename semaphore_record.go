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

// recorder returns the backend's Recorder; nil when the driver keeps no
// records (a third-party driver).
func (l *Locker) recorder() driver.Recorder {
	r, _ := l.drv.(driver.Recorder)
	return r
}

// checkRecord makes sure the key's record says this Semaphore's N, writing
// it if the key has none. It reads the record at every acquire, so that a
// client of the old number started after a ResetSemaphore is refused once
// the new number is recorded, not trusted from an earlier read.
func (s *Semaphore) checkRecord(ctx context.Context) error {
	rec := s.l.recorder()
	if rec == nil {
		return nil // the check of the other permits' descriptions remains
	}
	if err := s.l.checkOpen(); err != nil {
		return err
	}
	want := recordValue(s.n)
	got, err := rec.Record(ctx, s.key, want)
	if err != nil {
		return fmt.Errorf("reading the number of permits: %w", classify(ctx, err, false))
	}
	if got != want {
		return fmt.Errorf("%w: the semaphore is recorded with %s, this client uses %d permits (every client of a key must use one number; Locker.ResetSemaphore changes it once no client of the other number runs)", ErrInvalidOption, describeRecord(got), s.n)
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
func (l *Locker) ResetSemaphore(ctx context.Context, key string, permits int) (bool, error) {
	wrap := func(err error) error { return fmt.Errorf("dlock: reset semaphore %q: %w", key, err) }
	if permits < 1 || permits > MaxPermits {
		return false, wrap(fmt.Errorf("%w: a semaphore has from 1 to %d permits, got %d", ErrInvalidOption, MaxPermits, permits))
	}
	if err := checkKey(key); err != nil {
		return false, wrap(err)
	}
	if err := ctx.Err(); err != nil {
		return false, wrap(err)
	}
	if err := l.checkOpen(); err != nil {
		return false, wrap(err)
	}
	rec := l.recorder()
	if rec == nil {
		return false, wrap(fmt.Errorf("the backend keeps no records: %w", errors.ErrUnsupported))
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
