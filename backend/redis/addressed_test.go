package redis

import (
	"strings"
	"testing"
)

// Release messages: a wake-up names its owner, a grant adds the token, the
// server ms since the waiter's last refresh and the attempt that made it;
// anything else (a grant in an older form, which names no attempt,
// included) is for every waiter, who attempt.
func TestAddressed(t *testing.T) {
	o := strings.Repeat("ab", 16)
	for _, c := range []struct {
		payload string
		owner   string
		grant   *grant
	}{
		{o, o, nil},
		{o + ":42:317:1z", o, &grant{42, 317, "1z"}},
		{o + ":42:317", "", nil},
		{o + ":42", "", nil},
		{strings.Repeat("g", 32), "", nil},
		{strings.Repeat("ab", 15) + ":42:317:1z", "", nil},
		{o + ":0:3:1", "", nil},
		{o + ":42:-1:1", "", nil},
		{o + ":42:x:1", "", nil},
		{o + ":x:3:1", "", nil},
		{"released", "", nil},
		{strings.Repeat("g", 32) + ":1:1:1", "", nil},
		{"", "", nil},
	} {
		owner, g := addressed(c.payload)
		if owner != c.owner || (g == nil) != (c.grant == nil) || g != nil && *g != *c.grant {
			t.Errorf("addressed(%q) = %q, %+v; want %q, %+v", c.payload, owner, g, c.owner, c.grant)
		}
	}
}
