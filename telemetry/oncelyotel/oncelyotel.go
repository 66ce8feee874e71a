// Package oncelyotel reports what oncely does as OpenTelemetry traces and
// metrics, through wrappers, so that programs without OpenTelemetry do not
// depend on it.
//
// Wrap the three places where oncely works:
//
//	in, _ := oncelyotel.New(nil) // the global providers
//	exec := client.New(in.Store(store), nil)   // spans oncely.claim, oncely.record, ...; ledger latency
//	_ = exec.Register(in.Tool(refundTool))      // spans oncely.tool.run, oncely.reconcile; tool latency
//	traced := in.Executor(exec)                 // a span oncely.execute per call; outcomes per tool
//	reg, _ := in.UncertainGauge(store)          // records awaiting reconciliation
//
// and call traced.Execute instead of exec.Execute: the store's and the
// tool's spans are children of the call's span, since the executor passes
// the call's context down.
//
// # Metrics
//
//	oncely.calls              counter    calls by tool and outcome
//	oncely.execute.duration   histogram  seconds per call, by tool and outcome
//	oncely.ledger.duration    histogram  seconds per ledger operation, by op (claim, complete, ...) and error
//	oncely.tool.duration      histogram  seconds per tool run, by tool and error class
//	oncely.reconciles         counter    reconciler answers by tool and verdict
//	oncely.records.uncertain  gauge      uncertain records in the ledger
//
// No attribute holds a tool's input.
package oncelyotel

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/ledger"
)

// Scope is the instrumentation scope of the tracer and the meter.
const Scope = "github.com/oncely/oncely/telemetry/oncelyotel"

// Config chooses the providers. The zero value (or nil) uses the global
// ones (otel.GetTracerProvider, otel.GetMeterProvider).
type Config struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Clock times operations (default: the system clock).
	Clock clock.Clock
	// UncertainLimit bounds the records the uncertain gauge lists per
	// collection (default 10000); the gauge reports at most that many.
	UncertainLimit int
}

// Instruments holds the tracer and the metric instruments the wrappers
// share.
type Instruments struct {
	tracer         trace.Tracer
	meter          metric.Meter
	clock          clock.Clock
	uncertainLimit int

	calls      metric.Int64Counter
	execDur    metric.Float64Histogram
	ledgerDur  metric.Float64Histogram
	toolDur    metric.Float64Histogram
	reconciles metric.Int64Counter
}

// New creates the instruments.
func New(cfg *Config) (*Instruments, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.UncertainLimit <= 0 {
		c.UncertainLimit = 10000
	}
	in := &Instruments{
		tracer:         c.TracerProvider.Tracer(Scope, trace.WithInstrumentationVersion(oncely.Version)),
		meter:          c.MeterProvider.Meter(Scope, metric.WithInstrumentationVersion(oncely.Version)),
		clock:          c.Clock,
		uncertainLimit: c.UncertainLimit,
	}
	var err error
	if in.calls, err = in.meter.Int64Counter("oncely.calls", metric.WithDescription("Tool calls by outcome."), metric.WithUnit("{call}")); err != nil {
		return nil, err
	}
	if in.execDur, err = in.meter.Float64Histogram("oncely.execute.duration", metric.WithDescription("Duration of a tool call through the executor."), metric.WithUnit("s")); err != nil {
		return nil, err
	}
	if in.ledgerDur, err = in.meter.Float64Histogram("oncely.ledger.duration", metric.WithDescription("Duration of a ledger operation."), metric.WithUnit("s")); err != nil {
		return nil, err
	}
	if in.toolDur, err = in.meter.Float64Histogram("oncely.tool.duration", metric.WithDescription("Duration of a tool run (the provider call)."), metric.WithUnit("s")); err != nil {
		return nil, err
	}
	if in.reconciles, err = in.meter.Int64Counter("oncely.reconciles", metric.WithDescription("Reconciler answers by verdict."), metric.WithUnit("{answer}")); err != nil {
		return nil, err
	}
	return in, nil
}

// since returns the seconds elapsed since start.
func (in *Instruments) since(start time.Time) float64 { return in.clock.Now().Sub(start).Seconds() }

// fail marks span failed with err.
func fail(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// Executor executes tool calls; *client.Executor implements it.
type Executor interface {
	Execute(ctx context.Context, runID string, call client.Call) (client.Result, error)
}

// TracedExecutor is an Executor with a span and metrics per call.
type TracedExecutor struct {
	next Executor
	in   *Instruments
}

// Executor wraps next.
func (in *Instruments) Executor(next Executor) *TracedExecutor {
	return &TracedExecutor{next: next, in: in}
}

// Execute runs the call in a span named oncely.execute, and counts its
// outcome. A span's status is Error when the outcome is shown to the model
// as an error, or when Execute returned an error.
func (t *TracedExecutor) Execute(ctx context.Context, runID string, call client.Call) (client.Result, error) {
	ctx, span := t.in.tracer.Start(ctx, "oncely.execute", trace.WithAttributes(
		attribute.String("oncely.tool", call.Tool), attribute.String("oncely.run", runID),
		attribute.String("oncely.call_id", call.ID)))
	defer span.End()
	start := t.in.clock.Now()
	res, err := t.next.Execute(ctx, runID, call)
	attrs := attribute.NewSet(attribute.String("oncely.tool", call.Tool), attribute.String("oncely.outcome", res.Outcome.String()))
	t.in.calls.Add(ctx, 1, metric.WithAttributeSet(attrs))
	t.in.execDur.Record(ctx, t.in.since(start), metric.WithAttributeSet(attrs))
	span.SetAttributes(attribute.String("oncely.outcome", res.Outcome.String()),
		attribute.String("oncely.key", res.Key), attribute.Int("oncely.attempt", res.Attempt),
		attribute.Bool("oncely.shared", res.Shared))
	switch {
	case err != nil:
		fail(span, err)
	case res.IsError:
		span.SetStatus(codes.Error, res.Outcome.String())
	}
	return res, err
}

// Tool returns t with its Run in a span named oncely.tool.run and its
// Reconciler (if any) in a span named oncely.reconcile, both timed and
// counted.
func (in *Instruments) Tool(t client.Tool) client.Tool {
	run := t.Run
	t.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		ctx, span := in.tracer.Start(ctx, "oncely.tool.run", trace.WithAttributes(invocationAttrs(inv)...))
		defer span.End()
		start := in.clock.Now()
		eff, err := run(ctx, inv)
		class := "none"
		if err != nil {
			class = errclass.Of(err).String()
			fail(span, err)
			span.SetAttributes(attribute.String("oncely.error_class", class))
		}
		in.toolDur.Record(ctx, in.since(start), metric.WithAttributes(
			attribute.String("oncely.tool", inv.Tool), attribute.String("oncely.error_class", class)))
		return eff, err
	}
	if t.Reconciler != nil {
		t.Reconciler = &reconciler{next: t.Reconciler, in: in}
	}
	return t
}

func invocationAttrs(inv client.Invocation) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("oncely.tool", inv.Tool), attribute.String("oncely.key", inv.Key),
		attribute.Int("oncely.attempt", inv.Attempt),
	}
}

type reconciler struct {
	next client.Reconciler
	in   *Instruments
}

func (r *reconciler) Reconcile(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
	ctx, span := r.in.tracer.Start(ctx, "oncely.reconcile", trace.WithAttributes(invocationAttrs(inv)...))
	defer span.End()
	rec, err := r.next.Reconcile(ctx, inv)
	verdict := rec.Verdict.String()
	if err != nil {
		verdict = "error"
		fail(span, err)
	}
	span.SetAttributes(attribute.String("oncely.verdict", verdict))
	r.in.reconciles.Add(ctx, 1, metric.WithAttributes(attribute.String("oncely.tool", inv.Tool), attribute.String("oncely.verdict", verdict)))
	return rec, err
}

// UncertainGauge registers the gauge oncely.records.uncertain, computed
// at each collection by listing the uncertain records of store (up to
// Config.UncertainLimit). Register it once per ledger, in the process that
// runs the sweeper; Unregister the returned registration to stop.
func (in *Instruments) UncertainGauge(store ledger.Store) (metric.Registration, error) {
	g, err := in.meter.Int64ObservableGauge("oncely.records.uncertain",
		metric.WithDescription("Records whose effect may exist, awaiting reconciliation."), metric.WithUnit("{record}"))
	if err != nil {
		return nil, err
	}
	return in.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		recs, err := store.List(ctx, ledger.Filter{State: ledger.StateUncertain, Limit: in.uncertainLimit})
		if err != nil {
			return fmt.Errorf("oncelyotel: listing uncertain records: %w", err)
		}
		o.ObserveInt64(g, int64(len(recs)))
		return nil
	}, g)
}
