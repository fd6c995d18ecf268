package lockctl

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// writeTable prints the results as a terminal table, one group per
// scenario so that backends compare line by line.
func writeTable(w io.Writer, rep benchReport) {
	fmt.Fprintf(w, "lockctl bench: %s per scenario per backend; %s, %d CPUs, %s\n\n",
		rep.Duration, rep.Host, rep.CPUs, rep.Go)
	rows := [][]string{{"SCENARIO", "BACKEND", "GOROUTINES", "ACQ/S", "LOCK P50", "LOCK P99", "HANDOFF P50", "HANDOFF P99", "REQ/ACQ"}}
	prev := ""
	for _, r := range rep.Results {
		if prev != "" && r.Scenario != prev {
			rows = append(rows, nil)
		}
		prev = r.Scenario
		if r.Error != "" {
			rows = append(rows, []string{r.Scenario, compactURL(r.Backend), fmt.Sprint(r.Goroutines), "error"})
			continue
		}
		rows = append(rows, []string{r.Scenario, compactURL(r.Backend), fmt.Sprint(r.Goroutines), fmtRate(r.OpsPerSec),
			fmtMs(r.LockP50), fmtMs(r.LockP99), fmtOptMs(r.HandoffP50), fmtOptMs(r.HandoffP99), fmtReq(r.RequestsPerAcq)})
	}
	printColumns(w, rows, 2) // the first two columns are text, the rest numbers
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "\n%s on %s failed: %s", r.Scenario, r.Backend, r.Error)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "LOCK: time for Lock to return (in contended, it includes waiting for the holder).")
	fmt.Fprintln(w, "HANDOFF: from a holder's Unlock to the next waiter's Lock returning.")
	fmt.Fprintln(w, "REQ/ACQ: requests the servers counted per acquisition (Redis: commands, including those")
	fmt.Fprintln(w, "inside Lua scripts; etcd: gRPC messages; ZooKeeper: packets); n/a where lockctl cannot count.")
}

// compactURL shortens a URL with several hosts to its first one and a
// count: redlock://h1:6380+4 for five masters.
func compactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	hosts := strings.Split(rest[:end], ",")
	if len(hosts) < 2 {
		return u
	}
	return fmt.Sprintf("%s://%s+%d%s", scheme, hosts[0], len(hosts)-1, rest[end:])
}

// printColumns prints rows in aligned columns: the first textCols
// left-aligned, the others right-aligned. A nil row is a blank line.
func printColumns(w io.Writer, rows [][]string, textCols int) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < textCols {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func fmtRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// fmtMs prints a latency given in milliseconds with a fitting unit.
func fmtMs(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d <= 0:
		return "-"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", v)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", v)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func fmtOptMs(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmtMs(*v)
}

func fmtReq(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *v)
}
