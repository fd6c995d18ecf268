package consul

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/dlock-go/dlock/driver"
)

var _ driver.Recorder = (*consulDriver)(nil)

// recordDir is the path segment, under the Locker's prefix, that holds the
// records. encodeKey writes "~" only before two upper-case hex digits, so
// no lock path (prefix + "/" + encodeKey(key)) has "~records" as its first
// segment: no record is ever a lock's key, or under one.
const recordDir = "~records"

// recordPath is the KV path of key's record.
func (d *consulDriver) recordPath(key string) string {
	return d.prefix + "/" + recordDir + "/" + encodeKey(key)
}

// consistent is qopts with a consistent read: the leader checks with a
// quorum that it still leads before it answers, so a read never misses a
// record written before it began.
func (d *consulDriver) consistent(ctx context.Context) *api.QueryOptions {
	q := d.qopts(ctx)
	q.RequireConsistent = true
	return q
}

// Record writes key's record with a check-and-set at ModifyIndex 0, which
// Consul applies only if the key does not exist (through Raft, as a lock
// acquire is); when it exists, a consistent read returns it. A record
// cleared between the two is written again, so the call loops until one of
// them answers.
func (d *consulDriver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("consul: %w", err)
	}
	path := d.recordPath(key)
	for {
		ok, _, err := d.c.KV().CAS(&api.KVPair{Key: path, Value: []byte(value), ModifyIndex: 0}, d.wopts(ctx))
		if err != nil {
			return "", mapErr(ctx, "record", err)
		}
		if ok {
			return value, nil
		}
		kv, _, err := d.c.KV().Get(path, d.consistent(ctx))
		if err != nil {
			return "", mapErr(ctx, "record", err)
		}
		if kv != nil {
			return string(kv.Value), nil
		}
		if err := d.check(ctx); err != nil {
			return "", err
		}
	}
}

// ClearRecord reads key's record (consistently) and, if it is value,
// deletes it with a check-and-set on the ModifyIndex read, so that a
// record cleared and written again meanwhile is left alone.
func (d *consulDriver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("consul: %w", err)
	}
	path := d.recordPath(key)
	for {
		kv, _, err := d.c.KV().Get(path, d.consistent(ctx))
		if err != nil {
			return false, mapErr(ctx, "clear record", err)
		}
		if kv == nil || string(kv.Value) != value {
			return false, nil
		}
		ok, _, err := d.c.KV().DeleteCAS(&api.KVPair{Key: path, ModifyIndex: kv.ModifyIndex}, d.wopts(ctx))
		if err != nil {
			return false, mapErr(ctx, "clear record", err)
		}
		if ok {
			return true, nil
		}
		// Changed since the read: look again.
		if err := d.check(ctx); err != nil {
			return false, err
		}
	}
}
