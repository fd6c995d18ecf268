package main_test

import (
	"bytes"
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
)

// benchBackends are mem:// and file:// always, plus the servers whose
// endpoints are set (required under make test).
func benchBackends(t *testing.T) []string {
	urls := []string{"mem://", "file://" + t.TempDir()}
	for _, v := range []string{"DLOCK_REDIS_URL", "DLOCK_ETCD_URL"} {
		if u := os.Getenv(v); u != "" {
			urls = append(urls, u)
		} else if testenv.Required(v) {
			t.Fatalf("%s is required (%s) but not set", v, testenv.RequireVar)
		} else {
			t.Logf("%s not set: benchmarking without it", v)
		}
	}
	return urls
}

func benchArgs(urls []string, extra ...string) []string {
	args := []string{"bench", "--duration", "300ms"}
	for _, u := range urls {
		args = append(args, "--backend", u)
	}
	return append(args, extra...)
}

type benchJSON struct {
	Results []struct {
		Backend        string   `json:"backend"`
		Scenario       string   `json:"scenario"`
		Acquisitions   int64    `json:"acquisitions"`
		OpsPerSec      float64  `json:"acquisitions_per_sec"`
		LockP50        float64  `json:"lock_p50_ms"`
		LockP99        float64  `json:"lock_p99_ms"`
		HandoffP50     *float64 `json:"handoff_p50_ms"`
		RequestsPerAcq *float64 `json:"requests_per_acquisition"`
		Error          string   `json:"error"`
	} `json:"results"`
}

// --json gives every scenario against every backend, with requests per
// acquisition counted on Redis and etcd, and n/a (absent) elsewhere.
func TestBenchJSON(t *testing.T) {
	urls := benchBackends(t)
	r := runLockctl(t, 3*time.Minute, benchArgs(urls, "--json")...)
	if r.code != 0 {
		t.Fatalf("lockctl bench --json: exit %d\n%s", r.code, r.stderr)
	}
	var rep benchJSON
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	if len(rep.Results) != 3*len(urls) {
		t.Fatalf("%d results; want 3 scenarios x %d backends", len(rep.Results), len(urls))
	}
	for _, res := range rep.Results {
		if res.Error != "" || res.Acquisitions <= 0 || res.OpsPerSec <= 0 || res.LockP50 <= 0 || res.LockP99 < res.LockP50 {
			t.Errorf("result %+v: want acquisitions, a rate and p50 <= p99", res)
		}
		if (res.Scenario == "contended") != (res.HandoffP50 != nil) {
			t.Errorf("%s on %s: handoff %v; want it exactly for contended", res.Scenario, res.Backend, res.HandoffP50)
		}
		server := strings.HasPrefix(res.Backend, "redis") || strings.HasPrefix(res.Backend, "etcd")
		if server != (res.RequestsPerAcq != nil) {
			t.Errorf("%s on %s: requests per acquisition %v; want them counted exactly on servers", res.Scenario, res.Backend, res.RequestsPerAcq)
		}
		if res.RequestsPerAcq != nil && *res.RequestsPerAcq < 1 {
			t.Errorf("%s on %s: %.2f requests per acquisition; want at least 1", res.Scenario, res.Backend, *res.RequestsPerAcq)
		}
	}
}

// The table and the HTML report: the report renders in a headless browser
// with its charts visible.
func TestBenchReport(t *testing.T) {
	browser := findChromium(t)
	urls := benchBackends(t)
	dir := t.TempDir()
	report := filepath.Join(dir, "report.html")
	r := runLockctl(t, 3*time.Minute, benchArgs(urls, "--html", report)...)
	if r.code != 0 {
		t.Fatalf("lockctl bench: exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"SCENARIO", "ACQ/S", "LOCK P99", "HANDOFF P50", "REQ/ACQ", "uncontended", "parallel-keys", "contended", "n/a"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, u := range urls {
		if strings.Count(r.stdout, strings.TrimSuffix(u, "/")) < 3 {
			t.Errorf("table lacks three rows for %s:\n%s", u, r.stdout)
		}
	}
	t.Logf("\n%s", r.stdout)

	html, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{"<script", "http://", "https://"} {
		if i := bytes.Index(html, []byte(banned)); i >= 0 && !bytes.Contains(html[max(0, i-30):i], []byte("xmlns")) {
			t.Errorf("report contains %q: not self-contained", banned)
		}
	}

	// The DOM as the browser built it: every chart is an SVG with bars.
	dom := runBrowser(t, browser, "--dump-dom", "file://"+report)
	charts := strings.Count(dom, `<div class="chart"><svg`)
	// Throughput and latency for each scenario, handoff for contended, and
	// requests where counted.
	if charts < 7 {
		t.Fatalf("rendered DOM has %d charts; want at least 7", charts)
	}
	if paths := strings.Count(dom, "<path"); paths < 10*charts {
		t.Fatalf("rendered DOM has %d <path> elements for %d charts: the charts look empty", paths, charts)
	}

	// A screenshot shows them: the first backend's color fills many pixels.
	shot := filepath.Join(dir, "report.png")
	runBrowser(t, browser, "--hide-scrollbars", "--window-size=1280,1600", "--screenshot="+shot, "file://"+report)
	checkScreenshot(t, shot)
	if out := os.Getenv("LOCKCTL_REPORT_DIR"); out != "" { // to look at them
		_ = os.WriteFile(filepath.Join(out, "report.html"), html, 0o644)
		if b, err := os.ReadFile(shot); err == nil {
			_ = os.WriteFile(filepath.Join(out, "report.png"), b, 0o644)
		}
	}
}

// findChromium returns Debian's chromium; without it the test is skipped,
// unless backends are required (make test installs it).
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(testenv.RequireVar) != "" {
		t.Fatalf("chromium not found but %s is set: install it (apt-get install chromium)", testenv.RequireVar)
	}
	t.Skip("chromium not found (apt-get install chromium)")
	return ""
}

// runBrowser runs headless chromium with args and returns its stdout.
func runBrowser(t *testing.T, browser string, args ...string) string {
	t.Helper()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.Command(browser, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("chromium %v did not finish", args)
	}
	return out.String()
}

// checkScreenshot checks that the page is not blank: many colors, and the
// bars of the first backend (its color, #1f77b4) cover a visible area.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colors := map[color.RGBA]bool{}
	bar := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			colors[c] = true
			if near(c, color.RGBA{0x1f, 0x77, 0xb4, 255}) {
				bar++
			}
		}
	}
	if len(colors) < 20 {
		t.Fatalf("screenshot has %d colors: blank page", len(colors))
	}
	if bar < 500 {
		t.Fatalf("screenshot has %d pixels of the first backend's bars; want a visible chart", bar)
	}
}

func near(a, b color.RGBA) bool {
	d := func(x, y uint8) int {
		if x > y {
			return int(x - y)
		}
		return int(y - x)
	}
	return d(a.R, b.R) < 12 && d(a.G, b.G) < 12 && d(a.B, b.B) < 12
}
