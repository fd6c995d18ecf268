package dlockotel

import (
	"context"
	"errors"
	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/observe"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/dlock-go/dlock/otel"

// Attribute keys.
const (
	AttrBackend   = attribute.Key("dlock.backend")
	AttrKey       = attribute.Key("dlock.key")
	AttrOp        = attribute.Key("dlock.op")
	AttrOutcome   = attribute.Key("dlock.outcome")
	AttrEnd       = attribute.Key("dlock.end")
	AttrLossCause = attribute.Key("dlock.loss.cause")
	AttrToken     = attribute.Key("dlock.token")
	AttrWatchdog  = attribute.Key("dlock.watchdog")
	// AttrErrorType is the semantic conventions' error.type, on failed
	// outcomes only: see the package documentation for its values.
	AttrErrorType = attribute.Key("error.type")
)

// Option configures New.
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	withKey bool
}

// WithMeterProvider records metrics with mp instead of the global
// otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider records spans with tp instead of the global
// otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithKeyAttribute adds dlock.key to every instrument and span. Keys can be
// of unbounded cardinality (an order ID in each), which a metrics backend
// pays for: turn it on only for a bounded set of keys.
func WithKeyAttribute() Option { return func(c *config) { c.withKey = true } }

// Observer records dlock's events as OpenTelemetry metrics and spans. Give
// it to dlock.Open, dlock.NewLocker or a NewMutex with dlock.WithObserver.
type Observer struct {
	tracer  trace.Tracer
	withKey bool

	wait, hold, renewDur, margin metric.Float64Histogram
	acquisitions, renewals, loss metric.Int64Counter
	held                         metric.Int64UpDownCounter
}

var _ observe.Observer = (*Observer)(nil)

// New returns an Observer over the global providers, or those given.
func New(opts ...Option) (*Observer, error) {
	c := config{}
	for _, o := range opts {
		o(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	m := c.mp.Meter(ScopeName)
	o := &Observer{tracer: c.tp.Tracer(ScopeName), withKey: c.withKey}
	var errs []error
	hist := func(name, desc string, bounds []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	count := func(name, unit, desc string) metric.Int64Counter {
		h, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return h
	}
	o.wait = hist("dlock.lock.wait.duration", "Time from a Lock or TryLock call to its outcome.", waitBuckets)
	o.hold = hist("dlock.lock.hold.duration", "Time from acquisition to the end of a hold.", holdBuckets)
	o.renewDur = hist("dlock.lock.renewal.duration", "Time one renewal took.", renewalBuckets)
	o.margin = hist("dlock.lock.renewal.margin", "What was left of the validity window when a renewal succeeded.", marginBuckets)
	o.acquisitions = count("dlock.lock.acquisitions", "{acquisition}", "Holds granted.")
	o.renewals = count("dlock.lock.renewals", "{renewal}", "Renewals, by outcome.")
	o.loss = count("dlock.lock.losses", "{loss}", "Holds lost, by cause.")
	var err error
	o.held, err = m.Int64UpDownCounter("dlock.lock.held", metric.WithUnit("{lock}"), metric.WithDescription("Holds now held."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return o, nil
}

// common are the attributes every instrument carries.
func (o *Observer) common(backend, key string, more ...attribute.KeyValue) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, 2+len(more))
	kv = append(kv, AttrBackend.String(backend))
	if o.withKey {
		kv = append(kv, AttrKey.String(key))
	}
	return metric.WithAttributes(append(kv, more...)...)
}

var spanNames = map[observe.Op]string{
	observe.OpLock:    "dlock.Lock",
	observe.OpTryLock: "dlock.TryLock",
	observe.OpUnlock:  "dlock.Unlock",
	observe.OpRenew:   "dlock.Renew",
}

// Begin starts the call's span.
func (o *Observer) Begin(ctx context.Context, c observe.Call) context.Context {
	attrs := []attribute.KeyValue{AttrBackend.String(c.Backend)}
	if o.withKey {
		attrs = append(attrs, AttrKey.String(c.Key))
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(c.Start),
	}
	if c.Watchdog {
		attrs = append(attrs, AttrWatchdog.Bool(true))
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, _ = o.tracer.Start(ctx, spanNames[c.Op], append(opts, trace.WithAttributes(attrs...))...)
	return ctx
}

// Step adds an event to Lock's span.
func (o *Observer) Step(ctx context.Context, _ observe.Call, s observe.Step) {
	trace.SpanFromContext(ctx).AddEvent(s.String())
}

// End records the call's metrics and ends its span.
func (o *Observer) End(ctx context.Context, c observe.Call, r observe.Result) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(AttrOutcome.String(string(r.Outcome)))
	if r.Token != 0 {
		span.SetAttributes(AttrToken.Int64(int64(min(uint64(r.Token), 1<<63-1))))
	}
	if r.Err != nil && (r.Outcome == observe.OutcomeError || r.Outcome == observe.OutcomeLost || r.Outcome == observe.OutcomeFailed) {
		span.RecordError(r.Err)
		span.SetStatus(codes.Error, r.Err.Error())
		span.SetAttributes(AttrErrorType.String(errorType(r.Outcome, r.Err)))
	}
	secs := r.Duration.Seconds()
	switch c.Op {
	case observe.OpLock, observe.OpTryLock:
		attrs := []attribute.KeyValue{AttrOp.String(c.Op.String()), AttrOutcome.String(string(r.Outcome))}
		if r.Outcome != observe.OutcomeAcquired {
			attrs = append(attrs, AttrErrorType.String(errorType(r.Outcome, r.Err)))
		}
		o.wait.Record(ctx, secs, o.common(c.Backend, c.Key, attrs...))
		if r.Outcome == observe.OutcomeAcquired {
			o.acquisitions.Add(ctx, 1, o.common(c.Backend, c.Key))
			o.held.Add(ctx, 1, o.common(c.Backend, c.Key))
		}
	case observe.OpRenew:
		var failed []attribute.KeyValue
		if r.Outcome != observe.OutcomeRenewed {
			failed = []attribute.KeyValue{AttrErrorType.String(errorType(r.Outcome, r.Err))}
		}
		o.renewals.Add(ctx, 1, o.common(c.Backend, c.Key, append(failed, AttrOutcome.String(string(r.Outcome)), AttrWatchdog.Bool(c.Watchdog))...))
		o.renewDur.Record(ctx, secs, o.common(c.Backend, c.Key, failed...))
		if r.Outcome == observe.OutcomeRenewed {
			o.margin.Record(ctx, r.Margin.Seconds(), o.common(c.Backend, c.Key))
		}
	}
	span.End()
}

// HoldEnd records the hold's duration, and its loss with the cause.
func (o *Observer) HoldEnd(e observe.HoldEnd) {
	ctx := context.Background()
	end := "unlocked"
	if e.Lost {
		end = "lost"
		if errors.Is(e.Cause, dlock.ErrMaxHoldReached) {
			end = "max_hold" // by design, not a failure
		}
		o.loss.Add(ctx, 1, o.common(e.Backend, e.Key, AttrLossCause.String(observe.LossCause(e.Cause)),
			AttrErrorType.String(errorType(observe.OutcomeLost, e.Cause))))
	}
	o.hold.Record(ctx, e.Held.Seconds(), o.common(e.Backend, e.Key, AttrEnd.String(end)))
	o.held.Add(ctx, -1, o.common(e.Backend, e.Key))
}
