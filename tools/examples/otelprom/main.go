// Command otelprom shows dlock's telemetry in Prometheus: it takes a lock
// over and over through an OpenTelemetry MeterProvider whose reader is the
// OpenTelemetry Prometheus exporter, and serves the metrics for scraping.
//
//	go run ./tools/examples/otelprom                         # mem://, metrics on 127.0.0.1:9464
//	go run ./tools/examples/otelprom --backend redis://127.0.0.1:6379
//	curl -s 127.0.0.1:9464/metrics | grep dlock_
//
// Prometheus names the instruments with their units: dlock.lock.wait.duration
// becomes dlock_lock_wait_duration_seconds, dlock.lock.acquisitions
// dlock_lock_acquisitions_total, and so on.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
	_ "github.com/dlock-go/dlock/backend/redis"
	dlockotel "github.com/dlock-go/dlock/otel"
)

func main() {
	backend := flag.String("backend", "mem://", "backend URL")
	addr := flag.String("listen", "127.0.0.1:9464", "address of the /metrics endpoint")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("metrics on http://%s/metrics\n", ln.Addr())
	if err := run(ctx, *backend, ln); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// run serves the metrics on ln and locks until ctx ends.
func run(ctx context.Context, backend string, ln net.Listener) error {
	reg := prometheus.NewRegistry()
	exporter, err := promexporter.New(promexporter.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())
	obs, err := dlockotel.New(dlockotel.WithMeterProvider(mp))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	locker, err := dlock.Open(ctx, backend, dlock.WithObserver(obs), dlock.WithTTL(3*time.Second))
	if err != nil {
		return err
	}
	defer locker.Close()
	m, err := locker.NewMutex("otelprom/job")
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		err := dlock.Do(ctx, m, func(ctx context.Context) error {
			select { // the work done under the lock
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			log.Print(err)
		}
	}
	return ctx.Err()
}
