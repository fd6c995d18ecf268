package file

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxPlainName bounds the escaped part of a file name, well under the 255
// bytes most file systems allow for one name.
const maxPlainName = 200

// fileName maps a key to the name of its state file, injectively:
//
//   - "k-" followed by the key with every byte outside [A-Za-z0-9_-]
//     written as %XX (upper-case hex), then ".lock", when that fits in
//     maxPlainName bytes. Percent-encoding is injective, and the result
//     holds no '/', '.' or NUL, so "." and ".." and "a/b" are plain names.
//   - otherwise "h-" followed by the SHA-256 of the key in hex, then
//     ".lock". The state file records the key itself, and every operation
//     checks it, so two keys whose hashes collided would get an error,
//     never one shared lock.
func fileName(key string) string {
	var b strings.Builder
	b.Grow(len(key) + 8)
	b.WriteString("k-")
	for i := 0; i < len(key); i++ {
		c := key[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		const hexDigits = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
		if b.Len() > maxPlainName+2 {
			break
		}
	}
	if b.Len() <= maxPlainName+2 {
		return b.String() + ".lock"
	}
	sum := sha256.Sum256([]byte(key))
	return "h-" + hex.EncodeToString(sum[:]) + ".lock"
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
