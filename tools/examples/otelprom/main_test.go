package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The exporter serves dlock's instruments under Prometheus names.
func TestMetricsScraped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, "mem://otelprom-test", ln) }()
	defer func() { cancel(); <-done }()

	want := []string{
		`dlock_lock_wait_duration_seconds_bucket{dlock_backend="mem",dlock_op="lock",dlock_outcome="acquired"`,
		`dlock_lock_hold_duration_seconds_count{dlock_backend="mem",dlock_end="unlocked"`,
		`dlock_lock_acquisitions_total{dlock_backend="mem"`,
		`dlock_lock_held{dlock_backend="mem"`,
	}
	deadline := time.Now().Add(30 * time.Second)
	var body string
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			ok := true
			for _, w := range want {
				ok = ok && strings.Contains(body, w)
			}
			if ok {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("no %s in the scrape", w)
		}
	}
	t.Logf("scrape:\n%s", body)
}
