package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.Recorder = (*Driver)(nil)

// Record runs the create-if-absent script of internal/redislua on every
// instance in parallel (one round trip each, bounded by the per-instance
// timeout) and returns the value held by a majority of all N instances
// (N/2 + 1, whether or not the others answered). When no value has a
// majority (too few instances answered, or concurrent calls with different
// values split the instances) the error matches ErrUnavailable; the
// instances keep what they were given, and a later call still finds no
// majority if the split is even (ClearRecord of each value ends it).
func (d *Driver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("redlock: %w", err)
	}
	keys, args := redislua.RecordArgs(d.names(key).record, value)
	replies := d.fanout(ctx, d.timeout(0), d.all, request{script: redislua.Record, keys: keys, args: args}, len(d.all), nil)
	var (
		answered int
		firstErr error
		votes    = map[string]int{}
	)
	for _, r := range replies {
		err := r.err
		var v string
		if err == nil {
			v, err = redislua.ParseRecord(r.val)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = d.instErr(reply{inst: r.inst, err: err})
			}
			continue
		}
		answered++
		votes[v]++
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	for v, n := range votes {
		if n >= d.quorum {
			return v, nil
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no instance failed")
	}
	return "", driver.Unavailable(fmt.Errorf(
		"redlock: no record value on a majority: %d of %d instances answered with %d different values, %d needed for one: %w",
		answered, len(d.inst), len(votes), d.quorum, firstErr))
}

// ClearRecord runs the compare-and-delete script on every instance in
// parallel and reports whether any instance deleted value. Fewer than a
// majority of answers is an error matching ErrUnavailable (the record may
// still be on a majority).
func (d *Driver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("redlock: %w", err)
	}
	keys, args := redislua.RecordArgs(d.names(key).record, value)
	t := d.tally(d.fanout(ctx, d.timeout(0), d.all, request{script: redislua.ClearRecord, keys: keys, args: args}, len(d.all), nil))
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if t.ok+t.no < d.quorum {
		return false, driver.Unavailable(fmt.Errorf("redlock: record cleared on %d of %d instances, %d unanswered, %d answers needed: %w",
			t.ok, len(d.inst), t.unknown, d.quorum, t.firstErr))
	}
	return t.ok > 0, nil
}
