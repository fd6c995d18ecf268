package file

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlock-go/dlock/driver"
)

// state is the content of one key's state file.
//
// The file is plain text so that `cat` shows who holds a key:
//
//	dlock-file v2
//	token   00001745312345678901
//	expires 01745312375678901234
//	owner   3f2a...(32 hex digits, or dashes when free)
//	key     "jobs/nightly-report"
//	meta    "host=web-1 pid=4242 prog=billing"   (padded with spaces)
//
// Numbers are zero-padded, a free owner is written as dashes and the
// quoted metadata (dlock.WithOwner, "" when free) is padded to the longest
// quoted form of driver.MaxMetaLen bytes, so every write of one key's file
// has the same length: a process killed in the middle of a write can leave
// old bytes only where new ones were going. A v1 file (no meta line) is
// read as having no metadata and rewritten as v2.
type state struct {
	token   uint64 // the last token issued for the key; 0 if never
	expires int64  // lease end, wall clock UnixNano; 0 when free
	owner   string // the holder's Request.Owner; "" when free
	key     string // the key this file belongs to; "" if never written
	meta    string // the holder's Request.Meta; "" when free
	// modified is the file's last write (mtime, UnixNano) when it was
	// read under its flock; not stored in the file. Set by update only.
	modified int64
}

const (
	header   = "dlock-file v2"
	headerV1 = "dlock-file v1"
	// metaWidth is the longest strconv.Quote of valid UTF-8 of
	// driver.MaxMetaLen bytes: every byte a control character ("\x01").
	metaWidth = 4*driver.MaxMetaLen + 2
	freeOwner = "--------------------------------"
)

// errCorrupt marks a state file that is not in the format above.
var errCorrupt = errors.New("corrupt state file")

// heldAt reports whether the lease runs at now.
func (s *state) heldAt(now time.Time) bool {
	return s.owner != "" && now.UnixNano() < s.expires
}

// freeSince is when a free key became free: its release (the last
// write) or the end of its lease, whichever is later.
func (s *state) freeSince() int64 { return max(s.modified, s.expires) }

// remaining is how long the lease still runs at now.
func (s *state) remaining(now time.Time) time.Duration {
	return time.Duration(s.expires - now.UnixNano())
}

func (s *state) encode() []byte {
	owner := s.owner
	if owner == "" {
		owner = freeOwner
	}
	return fmt.Appendf(nil, "%s\ntoken   %020d\nexpires %020d\nowner   %-32s\nkey     %s\nmeta    %-*s\n",
		header, s.token, s.expires, owner, strconv.Quote(s.key), metaWidth, strconv.Quote(s.meta))
}

// parseField reads one "name value" line of a state file into s and
// returns the name.
func (s *state) parseField(line string) (string, error) {
	name, val, ok := strings.Cut(line, " ")
	if !ok {
		return "", fmt.Errorf("%w: line %q", errCorrupt, line)
	}
	val = strings.TrimLeft(val, " ")
	var err error
	switch name {
	case "token":
		s.token, err = strconv.ParseUint(val, 10, 64)
	case "expires":
		s.expires, err = strconv.ParseInt(val, 10, 64)
	case "owner":
		s.owner = strings.TrimRight(val, " ")
		if s.owner == freeOwner {
			s.owner = ""
		}
	case "key":
		s.key, err = strconv.Unquote(val)
	case "meta":
		s.meta, err = strconv.Unquote(strings.TrimRight(val, " "))
	default:
		err = errors.New("unknown field")
	}
	if err != nil {
		return "", fmt.Errorf("%w: line %q: %v", errCorrupt, line, err)
	}
	return name, nil
}

// parseState reads a state file. An empty file is a key never held.
func parseState(b []byte) (state, error) {
	var s state
	if len(bytes.TrimSpace(b)) == 0 {
		return s, nil
	}
	lines := strings.Split(string(b), "\n")
	if lines[0] != header && lines[0] != headerV1 {
		return s, fmt.Errorf("%w: first line %q, want %q", errCorrupt, lines[0], header)
	}
	seen := map[string]bool{}
	for _, line := range lines[1:] {
		if line == "" {
			continue
		}
		name, err := s.parseField(line)
		if err != nil {
			return s, err
		}
		seen[name] = true
	}
	for _, name := range []string{"token", "expires", "owner", "key"} {
		if !seen[name] {
			return s, fmt.Errorf("%w: no %s line", errCorrupt, name)
		}
	}
	return s, nil
}
