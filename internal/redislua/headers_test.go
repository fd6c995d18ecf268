package redislua

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	goredis "github.com/redis/go-redis/v9"
)

// header is what a script's .lua file says of its arguments in the
// comment that opens it, lines "-- KEYS[n]  ..." and "-- ARGV[n]  ...":
// how many of each (n from 1 up, none missing), or that the script takes a
// list (KEYS[i]), with perKey ARGV for each key after the argv fixed ones
// (ARGV[2i-1] and ARGV[2i]: two a key; ARGV[i + 1]: one).
type header struct {
	keys, argv int
	list       bool
	perKey     int
}

var (
	declRe = regexp.MustCompile(`^--\s+(KEYS|ARGV)\[([^\]]+)\]\s`)
	useRe  = regexp.MustCompile(`\b(KEYS|ARGV)\[(\d+)\]`)
)

// parseScript reads src's header and the KEYS[n] and ARGV[n] its code
// uses (comments aside), each as "KEYS 3".
func parseScript(name, src string) (header, map[string]bool, error) {
	var h header
	lines := strings.Split(src, "\n")
	i := 0
	for ; i < len(lines) && strings.HasPrefix(lines[i], "--") && !strings.HasPrefix(lines[i], includeMarker); i++ {
		m := declRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[2])
		if err != nil {
			h.list = true // KEYS[i], ARGV[2i]: a list
			if m[1] == "ARGV" {
				h.perKey++
			}
			continue
		}
		count := &h.keys
		if m[1] == "ARGV" {
			count = &h.argv
		}
		if n != *count+1 {
			return h, nil, &headerError{name, m[1] + "[" + m[2] + "] out of order"}
		}
		*count = n
	}
	used := map[string]bool{}
	for _, line := range lines[i:] {
		code, _, _ := strings.Cut(line, "--")
		for _, m := range useRe.FindAllStringSubmatch(code, -1) {
			used[m[1]+" "+m[2]] = true
		}
	}
	return h, used, nil
}

type headerError struct{ file, msg string }

func (e *headerError) Error() string { return e.file + ": " + e.msg }

// arguments is what the Go side builds for each script: every function
// that makes its KEYS and ARGV, called with everything optional.
func arguments() map[string][][2]int {
	n := func(keys []string, args []any) [2]int { return [2]int{len(keys), len(args)} }
	nc := func(c Call) [2]int { return [2]int{len(c.Keys()), len(c.Args())} }
	k := QueueKeys{Lock: "l", Fence: "f", Meta: "m", Queue: "q", Deadlines: "d", Channel: "c", Inbox: "i", Sorted: true}
	return map[string][][2]int{
		"acquire.lua": {n(AcquireArgs("l", "f", "o", 1)), n(AcquireMetaArgs("l", "f", "m", "o", 1, "d"))},
		"release.lua": {n(ReleaseArgs("l", "c", "o", Publish, "m")), nc(ReleaseQueueCall(NewQueueHold(NewQueueSite(Publish, "i", "m"), k, "o", 1), true, true)),
			n(ReleaseHandoffArgs(k, "o", Publish, "m", "1"))},
		"renew.lua":       {n(RenewArgs("l", "o", 1))},
		"renewmany.lua":   {n(RenewManyArgs([]string{"a", "b"}, []string{"o", "p"}, 1))},
		"inspect.lua":     {n(InspectArgs("l", "f", "m", "c", true, Publish, "m")), n(InspectQueueArgs(k, true, Publish, "m"))},
		"queue.lua":       {nc(QueueCall(NewQueueHold(NewQueueSite(Publish, "i", ""), k, "o", 1), "m", true, "a"))},
		"record.lua":      {n(RecordArgs("r", "v"))},
		"clearrecord.lua": {n(RecordArgs("r", "v"))},
		"redlockacquire.lua": {n(RedlockAcquireArgs("l", "c", "m", "q", "e", "o", 1, "d", "1",
			&RedlockWaiter{Member: "w", Inbox: "i", Attempt: "a", Score: 1}))},
		"fence.lua": {n(FenceArgs("l", "c", "o", 1))},
	}
}

// checkHeaders holds every script's header in files to the code it runs
// and to the Go side's argument lists args, and returns what disagrees;
// fragments (files only included) have none.
func checkHeaders(files fs.FS, args map[string][][2]int) []string {
	var errs []string
	errorf := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		return []string{err.Error()}
	}
	included := map[string]bool{}
	for _, name := range names {
		b, _ := fs.ReadFile(files, name)
		for _, line := range strings.Split(string(b), "\n") {
			if inc, ok := strings.CutPrefix(line, includeMarker); ok {
				included[inc] = true
			}
		}
	}
	for _, name := range names {
		b, err := fs.ReadFile(files, name)
		if err != nil {
			return append(errs, err.Error())
		}
		h, used, err := parseScript(name, string(b))
		if err != nil {
			errorf("%v", err)
			continue
		}
		built, ok := args[name]
		if !ok {
			if !included[name] {
				errorf("%s: no Go function builds its KEYS and ARGV (add it to arguments), and no script includes it", name)
			}
			if h.keys+h.argv > 0 || h.list || len(used) > 0 {
				errorf("%s: a fragment uses or declares KEYS or ARGV: %+v %v", name, h, used)
			}
			continue
		}
		for u := range used {
			kind, num, _ := strings.Cut(u, " ")
			i, _ := strconv.Atoi(num)
			if kind == "KEYS" && i > h.keys || kind == "ARGV" && i > h.argv {
				errorf("%s uses %s[%d], which its header does not list", name, kind, i)
			}
		}
		for i := 1; i <= h.keys; i++ {
			if !used["KEYS "+strconv.Itoa(i)] {
				errorf("%s: its header lists KEYS[%d], which it does not use", name, i)
			}
		}
		for i := 1; i <= h.argv; i++ {
			if !used["ARGV "+strconv.Itoa(i)] {
				errorf("%s: its header lists ARGV[%d], which it does not use", name, i)
			}
		}
		var most [2]int
		for _, c := range built {
			if h.list {
				if c[0] == 0 || c[1] != h.argv+h.perKey*c[0] {
					errorf("%s: Go builds %d KEYS and %d ARGV; its header says %d ARGV and %d a key", name, c[0], c[1], h.argv, h.perKey)
				}
				continue
			}
			if c[0] > h.keys || c[1] > h.argv {
				errorf("%s: Go builds %d KEYS and %d ARGV; its header lists %d and %d", name, c[0], c[1], h.keys, h.argv)
			}
			most = [2]int{max(most[0], c[0]), max(most[1], c[1])}
		}
		if !h.list && most != [2]int{h.keys, h.argv} {
			errorf("%s: its header lists %d KEYS and %d ARGV; Go builds at most %d and %d", name, h.keys, h.argv, most[0], most[1])
		}
	}
	for name := range args {
		if _, err := fs.Stat(files, name); err != nil {
			errorf("arguments names %s, which is not a script", name)
		}
	}
	return errs
}

// Every script's header lists the KEYS and ARGV its code uses, and as many
// as the Go functions that build them give it.
func TestHeadersMatchArguments(t *testing.T) {
	for _, e := range checkHeaders(sources, arguments()) {
		t.Error(e)
	}
}

// The check finds each way a header and its script or Go side disagree.
func TestHeadersCheckFindsDisagreement(t *testing.T) {
	const ok = "-- KEYS[1]  k\n-- ARGV[1]  a\n-- ARGV[2]  b\n-- #include frag.lua\nredis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
	const frag = "-- a fragment\nlocal function f() return 1 end\n"
	args := map[string][][2]int{"s.lua": {{1, 2}}}
	const list = "-- KEYS[i]  k\n-- ARGV[1]  t\n-- ARGV[i + 1]  o\n-- #include frag.lua\nfor i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1], 'PX', ARGV[1]) end\n"
	for _, c := range []struct {
		name, src, frag string
		args            map[string][][2]int
		want            string // in one of the errors; "" for none
	}{
		{"agree", ok, frag, args, ""},
		{"used, not listed", strings.Replace(ok, "-- ARGV[2]  b\n", "", 1), frag, args, "uses ARGV[2]"},
		{"listed, not used", strings.Replace(ok, "ARGV[2])", "'1000')", 1), frag, args, "does not use"},
		{"out of order", strings.Replace(ok, "ARGV[2]  b", "ARGV[3]  b", 1), frag, args, "out of order"},
		{"Go builds more", ok, frag, map[string][][2]int{"s.lua": {{1, 3}}}, "Go builds 1 KEYS and 3 ARGV"},
		{"Go builds fewer", ok, frag, map[string][][2]int{"s.lua": {{1, 1}}}, "Go builds at most 1 and 1"},
		{"no Go side", ok, frag, map[string][][2]int{}, "no Go function"},
		{"Go side of no script", ok, frag, map[string][][2]int{"s.lua": {{1, 2}}, "t.lua": {{1, 1}}}, "not a script"},
		{"fragment with ARGV", ok, frag + "return ARGV[1]\n", args, "a fragment uses"},
		{"list", list, frag, map[string][][2]int{"s.lua": {{2, 3}, {1, 2}}}, ""},
		{"list, an ARGV short", list, frag, map[string][][2]int{"s.lua": {{2, 2}}}, "header says 1 ARGV and 1 a key"},
		{"list, two ARGV a key", strings.Replace(list, "-- ARGV[i + 1]  o\n", "-- ARGV[2i]  o\n-- ARGV[2i + 1]  p\n", 1), frag,
			map[string][][2]int{"s.lua": {{2, 3}}}, "header says 1 ARGV and 2 a key"},
	} {
		files := fstest.MapFS{"s.lua": {Data: []byte(c.src)}, "frag.lua": {Data: []byte(c.frag)}}
		errs := checkHeaders(files, c.args)
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e, c.want)
		}
		if c.want == "" && len(errs) > 0 || c.want != "" && !found {
			t.Errorf("%s: errors %q; want one with %q", c.name, errs, c.want)
		}
	}
}

// The scripts are composed: no include line is left, the token rule is
// in each script that makes a token, and the SHA sent with EVALSHA is
// that of the composed text.
func TestScriptsComposed(t *testing.T) {
	for name, s := range map[string]*goredis.Script{"acquire.lua": Acquire, "queue.lua": Queue,
		"release.lua": Release, "redlockacquire.lua": RedlockAcquire} {
		src := compose(name)
		if strings.Contains(src, "\n"+includeMarker) || !strings.Contains(src, "local function nextToken(") {
			t.Errorf("%s composed without the token rule:\n%s", name, src)
		}
		if sum := sha1.Sum([]byte(src)); s.Hash() != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: SHA %s is not that of the composed text", name, s.Hash())
		}
	}
}
