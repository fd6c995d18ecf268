package dlockotel_test

import (
	"context"
	"log"

	"github.com/dlock-go/dlock"
	_ "github.com/dlock-go/dlock/backend/memory"
	dlockotel "github.com/dlock-go/dlock/otel"
)

// Every Mutex of the Locker reports to the global MeterProvider and
// TracerProvider (set them up with the OpenTelemetry SDK and an exporter).
func ExampleNew() {
	ctx := context.Background()
	obs, err := dlockotel.New()
	if err != nil {
		log.Fatal(err)
	}
	locker, err := dlock.Open(ctx, "mem://", dlock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()
	m, _ := locker.NewMutex("reports/daily")
	_ = dlock.Do(ctx, m, func(ctx context.Context) error { return nil })
	// Output:
}
