package lockctl

import (
	"context"
	"strings"
	"testing"
	"time"
)

// lockctl run --metrics prints the figures of the lock it held.
func TestRunMetrics(t *testing.T) {
	sys, _, errb := testIO(map[string]string{"DLOCK_URL": "file://" + t.TempDir()})
	sys.Environ = []string{"PATH=/usr/bin:/bin"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := Main(ctx, []string{"run", "--metrics", "--ttl", "300ms", "job", "--", "sleep", "0.3"}, sys); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	out := errb.String()
	for _, want := range []string{
		"dlock.lock.wait.duration{op=lock,outcome=acquired}",
		"dlock.lock.hold.duration{end=unlocked}",
		"dlock.lock.acquisitions",
		"dlock.lock.renewals{outcome=renewed}",
		"dlock.lock.renewal.margin",
	} {
		if !strings.Contains(out, "file") || !strings.Contains(out, want) {
			t.Errorf("no %s for backend file in:\n%s", want, out)
		}
	}
}

// lockctl bench --metrics prints the figures per backend.
func TestMetricsSummary(t *testing.T) {
	sys, _, errb := testIO(nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if code := Main(ctx, []string{"bench", "--metrics", "--backend", "mem://", "--scenario", "uncontended", "--iterations", "50", "--duration", "1s"}, sys); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(errb.String(), "dlock.lock.acquisitions") || !strings.Contains(errb.String(), "mem ") {
		t.Errorf("bench --metrics printed no acquisitions for mem:\n%s", errb)
	}
}
