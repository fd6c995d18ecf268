package consul

import "strings"

// encodeKey maps a user key onto a Consul KV path segment sequence,
// injectively. Bytes in [A-Za-z0-9_-] are kept; every other byte is written
// as "~XX" (upper-case hex), except two that keep keys readable:
//
//   - '.' is kept unless it starts a path segment, so no segment is ever
//     "." or ".." (HTTP path cleaning would rewrite those);
//   - '/' is kept when it ends a non-empty segment and is not the last
//     byte, so the result has no empty segment and no trailing slash.
//
// '~' itself is always escaped, so decoding ("~XX" is a byte, anything else
// is itself) is unambiguous and two keys never share a path. The result
// contains only URL-safe characters and is at most three times as long as
// the key.
func encodeKey(key string) string {
	var b strings.Builder
	b.Grow(len(key) + len(key)/2)
	segStart := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case plain(c):
			b.WriteByte(c)
			segStart = false
		case c == '.' && !segStart:
			b.WriteByte(c)
		case c == '/' && !segStart && i+1 < len(key):
			b.WriteByte(c)
			segStart = true
		default:
			const hex = "0123456789ABCDEF"
			b.WriteByte('~')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
			segStart = false
		}
	}
	return b.String()
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// decodeKey inverts encodeKey. It reports false for a string encodeKey
// cannot have produced.
func decodeKey(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '~' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), encodeKey(b.String()) == s
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validPrefix reports whether p (without surrounding slashes) is a usable
// KV prefix: non-empty segments of [A-Za-z0-9._-], none "." or "..".
func validPrefix(p string) bool {
	if p == "" {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			if !plain(seg[i]) && seg[i] != '.' {
				return false
			}
		}
	}
	return true
}
