package redislua

import (
	"fmt"
	"testing"
	"time"
)

// A grant is "member:token:elapsed:attempt" with every part present; a
// wake-up ("member", "member releaser"), a message for every waiter, a
// grant in an older form (no attempt) and a malformed one are not grants.
func TestParseGrant(t *testing.T) {
	for _, c := range []struct {
		payload string
		want    Granted
		ok      bool
	}{
		{"abc:42:317:1z", Granted{"abc", 42, 317 * time.Millisecond, "1z"}, true},
		{"i0x.3:7:0:a", Granted{"i0x.3", 7, 0, "a"}, true},
		{"abc:42:317", Granted{}, false},
		{"abc:42", Granted{}, false},
		{"abc:42:317:", Granted{}, false},
		{":42:317:1", Granted{}, false},
		{"abc:0:3:1", Granted{}, false},
		{"abc:42:-1:1", Granted{}, false},
		{"abc:42::1", Granted{}, false},
		{"abc:42:x:1", Granted{}, false},
		{"abc:x:3:1", Granted{}, false},
		{"abc def", Granted{}, false},
		{"released", Granted{}, false},
		{"", Granted{}, false},
	} {
		g, ok := ParseGrant(c.payload)
		if ok != c.ok || g != c.want {
			t.Errorf("ParseGrant(%q) = %+v, %v; want %+v, %v", c.payload, g, ok, c.want, c.ok)
		}
	}
}

func ExampleParseGrant() {
	g, ok := ParseGrant("waiter:1700000000000001:12:3f")
	fmt.Println(g.Member, g.Token, g.Elapsed, g.Attempt, ok)
	// Output: waiter 1700000000000001 12ms 3f true
}
