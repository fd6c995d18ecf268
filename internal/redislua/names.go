package redislua

import "strings"

// CutNames sets out[i] to parts[i][0] + parts[i][1] + parts[i][2] for
// every i, cutting all of them from one string: one allocation for the
// names of a key instead of one per name. Both drivers make a key's names
// on every Lock and Unlock, so the saving is paid back on every call.
// out and parts must have the same length.
func CutNames(out []string, parts [][3]string) {
	size := 0
	for i := range parts {
		p := &parts[i]
		size += len(p[0]) + len(p[1]) + len(p[2])
	}
	var b strings.Builder
	b.Grow(size)
	for i := range parts {
		p := &parts[i]
		b.WriteString(p[0])
		b.WriteString(p[1])
		b.WriteString(p[2])
	}
	all := b.String()
	for i := range parts {
		p := &parts[i]
		n := len(p[0]) + len(p[1]) + len(p[2])
		out[i], all = all[:n], all[n:]
	}
}
