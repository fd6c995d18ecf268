package file

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// headMax is how much of a state file a renewal reads: the header, token,
// expires and owner lines of a v2 file, with room for an owner ID much
// longer than the 32 hex digits dlock makes.
const headMax = 256

// expiresAt is where the 20 digits of the expires field start in a v2
// file: after the header line, the token line and "expires ".
const expiresAt = len(header) + 1 + len("token   ") + 20 + 1 + len("expires ")

// extend is update for a renewal: fn checks the state and moves its
// expiry, and nothing else changes. A v2 file has every field at a fixed
// width, so extend reads only the head of the file (up to the owner line)
// and writes only the expires digits, in place, under the same flock: a
// renewal reads a few hundred bytes and writes 20 where a full update
// reads, parses and rewrites some 4 KiB (the metadata line is padded to
// its longest form). A file whose head is not the v2 layout (a v1 file, a
// damaged one) goes through the full read-modify-write.
func extend(ctx context.Context, path string, fn func(s *state, now time.Time) error) error {
	fd, err := openLocked(ctx, path, false)
	if err != nil {
		return err
	}
	defer unix.Close(fd) // also drops the flock
	var buf [headMax]byte
	n, err := preadFull(fd, buf[:])
	if err != nil {
		return unavailable(path, "read", err)
	}
	s, ok := parseHead(buf[:n])
	if !ok {
		return rewrite(fd, path, func(s *state, now time.Time) (bool, error) {
			err := fn(s, now)
			return err == nil, err
		})
	}
	if err := fn(&s, time.Now()); err != nil {
		return err
	}
	digits, ok := fixed20(s.expires)
	if !ok {
		return rewrite(fd, path, func(st *state, _ time.Time) (bool, error) {
			st.expires = s.expires
			return true, nil
		})
	}
	if _, err := unix.Pwrite(fd, digits[:], int64(expiresAt)); err != nil {
		return unavailable(path, "write", err)
	}
	return nil
}

// parseHead reads the token, expires and owner of a v2 file from its
// first bytes: ok only when the header, token, expires and owner lines are
// all there, in that order, whole, and the expires digits sit at
// expiresAt. The fields are parsed exactly as parseState parses them.
func parseHead(b []byte) (s state, ok bool) {
	// Only the four lines are made a string: a renewal's garbage is then
	// about the size of the head, not of the buffer.
	end, lines := 0, 0
	for lines < 4 {
		i := bytes.IndexByte(b[end:], '\n')
		if i < 0 {
			end = len(b)
			break
		}
		end += i + 1
		lines++
	}
	head := string(b[:end])
	rest, found := strings.CutPrefix(head, header+"\n")
	if !found {
		return s, false
	}
	for _, want := range []string{"token", "expires", "owner"} {
		line, after, whole := strings.Cut(rest, "\n")
		if !whole {
			return s, false
		}
		if want == "expires" && (len(head)-len(rest) != expiresAt-len("expires ") || len(line) != len("expires ")+20) {
			return s, false
		}
		if name, err := s.parseField(line); err != nil || name != want {
			return s, false
		}
		rest = after
	}
	return s, true
}

// fixed20 is v as the expires field writes it (%020d); ok is false for a
// value that does not fit in 20 characters that way.
func fixed20(v int64) (out [20]byte, ok bool) {
	if v < 0 {
		return out, false
	}
	var tmp [20]byte
	d := strconv.AppendInt(tmp[:0], v, 10)
	for i := range out {
		out[i] = '0'
	}
	copy(out[20-len(d):], d)
	return out, true
}

// preadFull reads fd from its start until buf is full or the file ends.
func preadFull(fd int, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], int64(n))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
