package redis

import (
	"context"
	"fmt"

	"github.com/dlock-go/dlock/driver"
	"github.com/dlock-go/dlock/internal/redislua"
)

var _ driver.Recorder = (*redisDriver)(nil)

// Record makes value key's record ({prefix:key}:record, in the key's hash
// slot) unless it has one, and returns the record, in one script
// (record.lua): a GET, and a SET without expiry when nothing was there.
// With WaitReplicas, the script is followed by a WAIT as an acquire is; when
// fewer replicas acknowledged in time, the record stays (a later call
// returns it) and the error matches ErrReplicas and ErrUnavailable.
func (d *redisDriver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	keys, args := redislua.RecordArgs(keyNames(d.cfg.Prefix, key).record, value)
	v, acks, err := d.run(ctx, redislua.ScriptCall(redislua.Record, keys, args))
	if err != nil {
		return "", d.mapErr(err)
	}
	got, err := redislua.ParseRecord(v)
	if err != nil {
		return "", err
	}
	if d.cfg.WaitReplicas > 0 && acks < int64(d.cfg.WaitReplicas) {
		return "", d.replicaErr(acks)
	}
	return got, nil
}

// ClearRecord deletes key's record if it is value (clearrecord.lua, a
// compare-and-delete), and reports whether it did. With WaitReplicas, a
// deletion fewer replicas acknowledged in time is an error matching
// ErrReplicas and ErrUnavailable (the record is gone on the primary).
func (d *redisDriver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("redis: %w", err)
	}
	keys, args := redislua.RecordArgs(keyNames(d.cfg.Prefix, key).record, value)
	v, acks, err := d.run(ctx, redislua.ScriptCall(redislua.ClearRecord, keys, args))
	if err != nil {
		return false, d.mapErr(err)
	}
	ok, err := redislua.ParseFlag(v)
	if err != nil {
		return false, err
	}
	if ok && d.cfg.WaitReplicas > 0 && acks < int64(d.cfg.WaitReplicas) {
		return false, d.replicaErr(acks)
	}
	return ok, nil
}
