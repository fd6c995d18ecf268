package move

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/dlock-go/dlock/driver"
)

// Prefix starts every record key the move keeps on a store: the commit
// record and the keys' bases. A Recorder call through the move driver on
// a key with this prefix is refused, so that no Semaphore can write one.
const Prefix = "dlock-move/"

// CommitKey is the record key of the commit, on Y.
const CommitKey = Prefix + "commit"

// baseKey is the record key of key's token base, on Y: the key itself
// after a prefix of its own, or its SHA-256 when that would be too long.
func baseKey(key string) string {
	const plain, hashed = Prefix + "base/", Prefix + "base-sha256/"
	if len(plain)+len(key) <= driver.MaxKeyLen {
		return plain + key
	}
	sum := sha256.Sum256([]byte(key))
	return hashed + hex.EncodeToString(sum[:])
}

// Config names the configuration a hold was taken in, as its owner
// description's tag says.
type Config string

const (
	// C0 is a plain client of X (no tag).
	C0 Config = "c0"
	// C1 holds on both stores.
	C1 Config = "c1"
	// C2 holds on Y alone, with lifted tokens.
	C2 Config = "c2"
)

// tagPrefix starts the owner descriptions of C1 and C2 holds: "dlock-move:c1 "
// then the holder's own description.
const tagPrefix = "dlock-move:"

// announceKeyPrefix is the key an Election announces its leaders on, whose
// owner description is "TERM VALUE" that every Election client parses: it
// is left untagged, so that plain clients of X keep reading it.
const announceKeyPrefix = "dlock-election-leader/"

// Tag returns meta with the configuration's tag in front, or meta alone
// when the tag does not fit within driver.MaxMetaLen bytes beside it (a
// holder's own description is never cut; Inspect then cannot tell the
// hold's configuration).
func Tag(key, meta string, c Config) string {
	t := tagPrefix + string(c) + " " + meta
	if strings.HasPrefix(key, announceKeyPrefix) || len(t) > driver.MaxMetaLen {
		return meta
	}
	return t
}

// Untag splits an owner description into its configuration (C0 when it
// has no tag) and the holder's own description.
func Untag(meta string) (Config, string) {
	for _, c := range []Config{C1, C2} {
		if rest, ok := strings.CutPrefix(meta, tagPrefix+string(c)+" "); ok {
			return c, rest
		}
	}
	return C0, meta
}
