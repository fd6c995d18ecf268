package move

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// A Recorder has no read: a record is read by proposing one. To look
// without leaving anything, the move proposes placeholder and clears it
// again if it was written; a writer that finds a placeholder clears it and
// proposes again. A look that found the placeholder (its own or another
// look's) happened before any real value was written, so the answer
// "absent" was true when it was read.
const placeholder = "dlock-move:absent"

// maxProposals bounds write's attempts against looks that keep writing
// placeholders in between.
const maxProposals = 16

// peek reads key's record without leaving one: ok false when it has none.
func peek(ctx context.Context, rec driver.Recorder, key string) (value string, ok bool, err error) {
	v, err := rec.Record(ctx, key, placeholder)
	if err != nil {
		return "", false, err
	}
	if v != placeholder {
		return v, true, nil
	}
	if _, err := rec.ClearRecord(ctx, key, placeholder); err != nil {
		return "", false, err
	}
	return "", false, nil
}

// write makes value key's record unless it has one, and returns the
// record, as Recorder.Record does, clearing the placeholders of looks.
func write(ctx context.Context, rec driver.Recorder, key, value string) (string, error) {
	for range maxProposals {
		v, err := rec.Record(ctx, key, value)
		if err != nil || v != placeholder {
			return v, err
		}
		if _, err := rec.ClearRecord(ctx, key, placeholder); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("move: record %q kept being looked at: %w", key, driver.ErrUnavailable)
}

// Headroom is added to the old store's token ceiling when the move is
// committed: it covers the tokens the old store issues between the
// ceiling's read and the commit record's write (a microsecond clock runs
// 2^40 in twelve days; a revision counter, a zxid's epochs, far slower).
const Headroom = 1 << 40

// Record is the commit record: OG is above every token the old store
// issued before the commit was written.
type Record struct {
	OG uint64
	// From is the scheme of the old store, for people reading it.
	From string
}

// ErrNotCommitted: the move has no commit record on the new store.
var ErrNotCommitted = errors.New("the move is not committed")

func (r Record) String() string { return "og=" + strconv.FormatUint(r.OG, 10) + " from=" + r.From }

func parseRecord(v string) (Record, error) {
	var r Record
	for _, f := range strings.Fields(v) {
		name, val, _ := strings.Cut(f, "=")
		switch name {
		case "og":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil || n == 0 {
				return r, fmt.Errorf("move: malformed commit record %q", v)
			}
			r.OG = n
		case "from":
			r.From = val
		}
	}
	if r.OG == 0 {
		return r, fmt.Errorf("move: malformed commit record %q", v)
	}
	return r, nil
}

// ReadCommit returns the commit record on to, or an error matching
// ErrNotCommitted when there is none.
func ReadCommit(ctx context.Context, to driver.Locker) (Record, error) {
	rec, ok := to.(driver.Recorder)
	if !ok {
		return Record{}, fmt.Errorf("%w: move: the new store keeps no records", driver.ErrInvalidOption)
	}
	v, found, err := peek(ctx, rec, CommitKey)
	if err != nil {
		return Record{}, err
	}
	if !found {
		return Record{}, ErrNotCommitted
	}
	return parseRecord(v)
}

// Commit reads from's token ceiling and writes the commit record on to,
// unless one is there (then it returns that one, and written false). The
// caller has made sure no instance runs on from alone any more.
func Commit(ctx context.Context, from, to driver.Locker, fromScheme string) (r Record, written bool, err error) {
	tc, ok := from.(driver.TokenCeiling)
	if !ok {
		return Record{}, false, fmt.Errorf("%w: move: the old store (%s) cannot bound its tokens (driver.TokenCeiling)", driver.ErrInvalidOption, fromScheme)
	}
	rec, ok := to.(driver.Recorder)
	if !ok {
		return Record{}, false, fmt.Errorf("%w: move: the new store keeps no records", driver.ErrInvalidOption)
	}
	c, err := tc.TokenCeiling(ctx)
	if err != nil {
		return Record{}, false, err
	}
	if c > ^uint64(0)/2 {
		return Record{}, false, fmt.Errorf("%w: move: the old store's tokens (%d) leave no room above them", driver.ErrInvalidOption, c)
	}
	want := Record{OG: c + Headroom, From: fromScheme}
	v, err := write(ctx, rec, CommitKey, want.String())
	if err != nil {
		return Record{}, false, err
	}
	got, err := parseRecord(v)
	if err != nil {
		return Record{}, false, err
	}
	return got, v == want.String(), nil
}

// base returns key's token base on rec, writing proposed if it has none.
func base(ctx context.Context, rec driver.Recorder, key string, proposed int64) (int64, error) {
	v, err := write(ctx, rec, baseKey(key), strconv.FormatInt(proposed, 10))
	if err != nil {
		return 0, err
	}
	b, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("move: malformed token base %q for key %q", v, key)
	}
	return b, nil
}

// peekBase returns key's token base, ok false when it has none.
func peekBase(ctx context.Context, rec driver.Recorder, key string) (int64, bool, error) {
	v, ok, err := peek(ctx, rec, baseKey(key))
	if err != nil || !ok {
		return 0, false, err
	}
	b, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("move: malformed token base %q for key %q", v, key)
	}
	return b, true, nil
}

// lift returns y + b, refusing a result that is not a positive uint64.
func lift(y uint64, b int64) (uint64, error) {
	if b < 0 {
		if y <= uint64(-b) {
			return 0, fmt.Errorf("move: token %d below its base %d: the new store's tokens went back", y, b)
		}
		return y - uint64(-b), nil
	}
	if y > ^uint64(0)-uint64(b) {
		return 0, fmt.Errorf("move: token %d plus base %d overflows", y, b)
	}
	return y + uint64(b), nil
}

// Base returns key's token base on to, ok false when it has none, for
// status reports.
func Base(ctx context.Context, to driver.Locker, key string) (int64, bool, error) {
	rec, ok := to.(driver.Recorder)
	if !ok {
		return 0, false, fmt.Errorf("%w: move: the new store keeps no records", driver.ErrInvalidOption)
	}
	return peekBase(ctx, rec, key)
}
