package file

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dlock-go/dlock/driver"
)

// recordHeader starts every record file.
const recordHeader = "dlock-record 1\n"

// recordName maps a key to the name of its record file: "r" followed by
// the key's state file name with ".record" for ".lock" ("rk-jobs.record",
// "rh-<sha256>.record"). State files start with "k-" or "h-" and temporary
// files with ".", so no key's state file can take a record's name.
func recordName(key string) string {
	return "r" + strings.TrimSuffix(fileName(key), ".lock") + ".record"
}

func (d *fileDriver) recordPath(key string) string { return filepath.Join(d.dir, recordName(key)) }

func encodeRecord(key, value string) []byte {
	return []byte(recordHeader + strconv.Quote(key) + "\n" + strconv.Quote(value) + "\n")
}

// parseRecord returns the key and the value a record file holds.
func parseRecord(b []byte) (key, value string, err error) {
	rest, ok := strings.CutPrefix(string(b), recordHeader)
	lines := strings.Split(rest, "\n")
	if !ok || len(lines) != 3 || lines[2] != "" {
		return "", "", errCorrupt
	}
	if key, err = strconv.Unquote(lines[0]); err != nil {
		return "", "", errCorrupt
	}
	if value, err = strconv.Unquote(lines[1]); err != nil {
		return "", "", errCorrupt
	}
	return key, value, nil
}

// Record makes value key's record unless it has one, and returns the
// record. The record file is written whole under a temporary name and
// linked to its final name: link(2) fails if that name exists, so of
// concurrent calls from any processes exactly one creates the file, and a
// record file never holds anything but a complete record. The others read
// the winner's file.
func (d *fileDriver) Record(ctx context.Context, key, value string) (string, error) {
	if err := d.check(ctx); err != nil {
		return "", err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return "", fmt.Errorf("file: %w", err)
	}
	path := d.recordPath(key)
	for {
		v, err := readRecord(path, key)
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, errNoFile) {
			return "", err
		}
		err = d.createRecord(path, encodeRecord(key, value))
		if err == nil {
			return value, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			return "", err
		}
		// Created meanwhile by another caller (and maybe cleared since):
		// read again.
		if err := d.check(ctx); err != nil {
			return "", err
		}
	}
}

// readRecord returns the value of the record file at path, errNoFile if
// there is none.
func readRecord(path, key string) (string, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if errors.Is(err, unix.ENOENT) {
		return "", errNoFile
	}
	if err != nil {
		return "", unavailable(path, "open", err)
	}
	defer unix.Close(fd)
	b, err := readAll(fd)
	if err != nil {
		return "", unavailable(path, "read", err)
	}
	return recordValue(path, key, b)
}

func recordValue(path, key string, b []byte) (string, error) {
	k, v, err := parseRecord(b)
	if err != nil {
		return "", driver.Unavailable(fmt.Errorf("file: %s: %w (remove the file to reset the record)", path, err))
	}
	if k != key {
		return "", driver.Unavailable(fmt.Errorf("file: %s belongs to key %q, not %q (hash collision)", path, k, key))
	}
	return v, nil
}

// createRecord writes data to a new temporary file in the lock directory,
// flushes it, and links it to path; the error wraps unix.EEXIST when path
// exists. The temporary name is removed in every case.
func (d *fileDriver) createRecord(path string, data []byte) error {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return driver.Unavailable(fmt.Errorf("file: record: %w", err))
	}
	tmp := filepath.Join(d.dir, ".record-"+hex.EncodeToString(rnd[:])+".tmp")
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
	if err != nil {
		return unavailable(tmp, "create", err)
	}
	defer unix.Unlink(tmp)
	err = writeAll(fd, data)
	if err == nil {
		err = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return unavailable(tmp, "write", err)
	}
	if err := unix.Link(tmp, path); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return err
		}
		return unavailable(path, "link", err)
	}
	return nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// ClearRecord removes key's record file if it holds value. The file is
// read and removed under its flock, and openLocked checks that the locked
// file is the one at the name: two clears never both act on one file, and
// no record written after the read can be removed, since a new record
// cannot be linked while the name exists.
func (d *fileDriver) ClearRecord(ctx context.Context, key, value string) (bool, error) {
	if err := d.check(ctx); err != nil {
		return false, err
	}
	if err := driver.CheckRecord(key, value); err != nil {
		return false, fmt.Errorf("file: %w", err)
	}
	path := d.recordPath(key)
	fd, err := openLocked(ctx, path, false)
	if errors.Is(err, errNoFile) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(fd) // also drops the flock
	b, err := readAll(fd)
	if err != nil {
		return false, unavailable(path, "read", err)
	}
	v, err := recordValue(path, key, b)
	if err != nil || v != value {
		return false, err
	}
	if err := unix.Unlink(path); err != nil {
		return false, unavailable(path, "remove", err)
	}
	return true, nil
}
