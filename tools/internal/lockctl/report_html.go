package lockctl

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"os"
	"strings"

	chart "github.com/wcharczuk/go-chart/v2"
	"github.com/wcharczuk/go-chart/v2/drawing"
)

// The HTML report is one file with everything inline: the charts are SVG
// rendered by go-chart in Go, so the page needs no script and no network.

// writeHTMLFile writes the report to path.
func writeHTMLFile(path string, rep benchReport) error {
	var buf bytes.Buffer
	if err := writeHTML(&buf, rep); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// htmlSection is one scenario in the report.
type htmlSection struct {
	Name, Text string
	Charts     []template.HTML // inline SVG
}

// htmlRow is one row of the report's table.
type htmlRow struct {
	Scenario, Backend, Full, Short           string
	Goroutines                               int
	Rate, P50, P99, HP50, HP99, Req, ReqWhat string
	Error                                    string
}

func writeHTML(w *bytes.Buffer, rep benchReport) error {
	short := shortNames(rep.Results)
	var rows []htmlRow
	for _, r := range rep.Results {
		rows = append(rows, htmlRow{
			Scenario: r.Scenario, Backend: compactURL(r.Backend), Full: r.Backend, Short: short[r.Backend], Goroutines: r.Goroutines,
			Rate: fmtRate(r.OpsPerSec), P50: fmtMs(r.LockP50), P99: fmtMs(r.LockP99),
			HP50: fmtOptMs(r.HandoffP50), HP99: fmtOptMs(r.HandoffP99),
			Req: fmtReq(r.RequestsPerAcq), ReqWhat: r.RequestsWhat, Error: r.Error,
		})
	}
	var sections []htmlSection
	for _, scen := range allScenarios {
		var rs []benchResult
		for _, r := range rep.Results {
			if r.Scenario == scen && r.Error == "" {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		sec := htmlSection{Name: scen, Text: scenarioText[scen]}
		add := func(svg string, err error) error {
			if err != nil {
				return fmt.Errorf("chart for %s: %w", scen, err)
			}
			if svg != "" {
				sec.Charts = append(sec.Charts, template.HTML(sizeSVG(svg))) // generated SVG, labels sanitised
			}
			return nil
		}
		if err := add(throughputChart(rs, short)); err != nil {
			return err
		}
		if err := add(latencyChart("Lock latency (ms): p50, p99", rs, short, func(r benchResult) (float64, float64, bool) {
			return r.LockP50, r.LockP99, true
		})); err != nil {
			return err
		}
		if scen == scenContended {
			if err := add(latencyChart("Handoff latency (ms): p50, p99", rs, short, func(r benchResult) (float64, float64, bool) {
				if r.HandoffP50 == nil {
					return 0, 0, false
				}
				return *r.HandoffP50, *r.HandoffP99, true
			})); err != nil {
				return err
			}
		}
		if err := add(requestsChart(rs, short)); err != nil {
			return err
		}
		sections = append(sections, sec)
	}
	return reportTemplate.Execute(w, map[string]any{"R": rep, "Rows": rows, "Sections": sections})
}

// palette gives each backend one color across every chart.
var palette = []drawing.Color{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, {R: 0xff, G: 0x7f, B: 0x0e, A: 255}, {R: 0x2c, G: 0xa0, B: 0x2c, A: 255},
	{R: 0xd6, G: 0x27, B: 0x28, A: 255}, {R: 0x94, G: 0x67, B: 0xbd, A: 255}, {R: 0x8c, G: 0x56, B: 0x4b, A: 255},
	{R: 0xe3, G: 0x77, B: 0xc2, A: 255}, {R: 0x7f, G: 0x7f, B: 0x7f, A: 255},
}

// shortNames gives each backend URL a short chart label: its scheme, with
// the host when two backends share a scheme.
func shortNames(rs []benchResult) map[string]string {
	var urls []string
	seen := map[string]bool{}
	for _, r := range rs {
		if !seen[r.Backend] {
			seen[r.Backend] = true
			urls = append(urls, r.Backend)
		}
	}
	schemes := map[string]int{}
	scheme := func(raw string) (string, string) {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" {
			return raw, ""
		}
		host := u.Host
		if host == "" {
			host = u.Path
		}
		return u.Scheme, host
	}
	for _, u := range urls {
		s, _ := scheme(u)
		schemes[s]++
	}
	out := map[string]string{}
	for _, u := range urls {
		s, h := scheme(u)
		name := s
		if schemes[s] > 1 && h != "" {
			name = s + " " + h
		}
		if len(name) > 28 {
			name = name[:27] + "…"
		}
		out[u] = sanitize(name)
	}
	return out
}

// sizeSVG gives go-chart's SVG, which has only a viewBox, the width and
// height of that viewBox, so that it keeps its size inside a flex layout.
func sizeSVG(svg string) string {
	open := strings.Index(svg, "<svg ")
	vb := strings.Index(svg, `viewBox="0 0 `)
	if open < 0 || vb < 0 {
		return svg
	}
	var w, h int
	if _, err := fmt.Sscanf(svg[vb:], `viewBox="0 0 %d %d"`, &w, &h); err != nil {
		return svg
	}
	return svg[:open] + fmt.Sprintf(`<svg width="%d" height="%d" `, w, h) + svg[open+len("<svg "):]
}

// sanitize keeps label text plain, since the SVG is inlined as is.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(`<>&"'`, r) {
			return '?'
		}
		return r
	}, s)
}

// colorOf returns a backend's color: its place among the report's backends.
func colorOf(rs []benchResult, backend string) drawing.Color {
	for i, r := range rs {
		if r.Backend == backend {
			return palette[i%len(palette)]
		}
	}
	return palette[0]
}

func barStyle(c drawing.Color) chart.Style {
	return chart.Style{FillColor: c, StrokeColor: c, StrokeWidth: 1}
}

// The size of a chart; it widens with its number of bars.
const (
	chartMinWidth = 400
	chartHeight   = 300
)

// barChart renders bars to SVG, with a y axis from 0.
func barChart(title string, bars []chart.Value, format func(float64) string) (string, error) {
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, b.Value)
	}
	if len(bars) == 0 || maxV <= 0 {
		return "", nil
	}
	width := max(chartMinWidth, 74*len(bars)+120)
	c := chart.BarChart{
		Title:        title,
		TitleStyle:   chart.Style{FontSize: 11},
		Width:        width,
		Height:       chartHeight,
		BarWidth:     max(16, min(60, (width-100)/len(bars)-14)),
		BarSpacing:   14,
		Background:   chart.Style{Padding: chart.Box{Top: 36, Left: 10, Right: 10, Bottom: 30}},
		XAxis:        chart.Style{FontSize: 8, TextRotationDegrees: 0},
		UseBaseValue: true,
		BaseValue:    0,
		YAxis: chart.YAxis{
			Style: chart.Style{FontSize: 8},
			Range: &chart.ContinuousRange{Min: 0, Max: maxV * 1.1},
			ValueFormatter: func(v any) string {
				if f, _ := v.(float64); f > 0 {
					return format(f)
				}
				return "0"
			},
		},
		Bars: bars,
	}
	var buf bytes.Buffer
	if err := c.Render(chart.SVG, &buf); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func throughputChart(rs []benchResult, short map[string]string) (string, error) {
	var bars []chart.Value
	for _, r := range rs {
		bars = append(bars, chart.Value{Label: short[r.Backend], Value: r.OpsPerSec, Style: barStyle(colorOf(rs, r.Backend))})
	}
	return barChart("Acquisitions per second (higher is better)", bars, func(v float64) string { return fmtRate(v) })
}

// latencyChart draws, for each backend, its p50 bar (light) and p99 bar
// (full color) side by side.
func latencyChart(title string, rs []benchResult, short map[string]string, get func(benchResult) (p50, p99 float64, ok bool)) (string, error) {
	var bars []chart.Value
	for _, r := range rs {
		p50, p99, ok := get(r)
		if !ok {
			continue
		}
		c := colorOf(rs, r.Backend)
		light := c.WithAlpha(110)
		bars = append(bars,
			chart.Value{Label: short[r.Backend] + " p50", Value: p50, Style: chart.Style{FillColor: light, StrokeColor: c, StrokeWidth: 1}},
			chart.Value{Label: "p99", Value: p99, Style: barStyle(c)})
	}
	return barChart(title+" (lower is better)", bars, func(v float64) string { return fmtMs(v) })
}

func requestsChart(rs []benchResult, short map[string]string) (string, error) {
	var bars []chart.Value
	for _, r := range rs {
		if r.RequestsPerAcq != nil {
			bars = append(bars, chart.Value{Label: short[r.Backend], Value: *r.RequestsPerAcq, Style: barStyle(colorOf(rs, r.Backend))})
		}
	}
	return barChart("Requests per acquisition (server-side count)", bars, func(v float64) string { return fmt.Sprintf("%.1f", v) })
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>lockctl bench — dlock backends compared</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 1rem 0; }
th, td { padding: 0.3rem 0.7rem; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f5f5f5; } td.l, th.l { text-align: left; }
.meta { color: #555; font-size: 0.9rem; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
.chart { border: 1px solid #e5e5e5; border-radius: 4px; }
.chart svg { display: block; }
.err { color: #b00; }
</style>
</head>
<body>
<h1>lockctl bench — dlock backends compared</h1>
<p class="meta">{{.R.Started.Format "2006-01-02 15:04:05 MST"}} on {{.R.Host}} ({{.R.CPUs}} CPUs, {{.R.Go}}).
Each scenario ran {{.R.Duration}} per backend{{if .R.Iterations}} (at most {{.R.Iterations}} acquisitions){{end}};
parallel-keys with {{.R.Parallel}} goroutines, contended with {{.R.Contenders}} goroutines over 2 Lockers holding {{.R.Hold}}.</p>
<table>
<tr><th class="l">scenario</th><th class="l">backend</th><th class="l">label</th><th>goroutines</th><th>acq/s</th><th>lock p50</th><th>lock p99</th><th>handoff p50</th><th>handoff p99</th><th>req/acq</th></tr>
{{range .Rows}}<tr><td class="l">{{.Scenario}}</td><td class="l" title="{{.Full}}">{{.Backend}}</td><td class="l">{{.Short}}</td><td>{{.Goroutines}}</td>
{{if .Error}}<td class="l err" colspan="6">error: {{.Error}}</td>{{else}}<td>{{.Rate}}</td><td>{{.P50}}</td><td>{{.P99}}</td><td>{{.HP50}}</td><td>{{.HP99}}</td><td title="{{.ReqWhat}}">{{.Req}}</td>{{end}}</tr>
{{end}}</table>
<p class="meta">Lock: time for Lock to return (in contended it includes waiting for the holder). Handoff: from a holder's Unlock
to the next waiter's Lock returning. req/acq: requests counted on the servers (Redis INFO commandstats, etcd /metrics,
ZooKeeper mntr) per acquisition; server-wide, so other clients inflate them; n/a where lockctl cannot count.</p>
{{range .Sections}}
<h2 id="{{.Name}}">{{.Name}}</h2>
<p class="meta">{{.Text}}</p>
<div class="charts">{{range .Charts}}<div class="chart">{{.}}</div>{{end}}</div>
{{end}}
</body>
</html>
`))
