package redis

import (
	"strings"
	"testing"
)

// Release messages: a wake-up names its owner, a grant adds the token and
// the server ms since the waiter's last refresh; a grant in the older
// two-field form counts as elapsed 0; anything else is for every waiter.
func TestAddressed(t *testing.T) {
	o := strings.Repeat("ab", 16)
	for _, c := range []struct {
		payload string
		owner   string
		token   uint64
		elapsed int64
	}{
		{o, o, 0, 0},
		{o + ":42:317", o, 42, 317},
		{o + ":42", o, 42, 0},
		{o + ":42:-1", "", 0, 0},
		{o + ":42:x", "", 0, 0},
		{o + ":x:3", "", 0, 0},
		{"released", "", 0, 0},
		{strings.Repeat("g", 32) + ":1:1", "", 0, 0},
		{"", "", 0, 0},
	} {
		owner, token, elapsed := addressed(c.payload)
		if owner != c.owner || token != c.token || elapsed != c.elapsed {
			t.Errorf("addressed(%q) = %q, %d, %d; want %q, %d, %d", c.payload, owner, token, elapsed, c.owner, c.token, c.elapsed)
		}
	}
}
