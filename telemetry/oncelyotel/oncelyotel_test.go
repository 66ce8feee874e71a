package oncelyotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgertest"
	"github.com/oncely/oncely/telemetry/oncelyotel"
)

type telemetry struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	in     *oncelyotel.Instruments
}

func newTelemetry(t *testing.T) *telemetry {
	t.Helper()
	tel := &telemetry{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tel.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(tel.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	var err error
	if tel.in, err = oncelyotel.New(&oncelyotel.Config{TracerProvider: tp, MeterProvider: mp}); err != nil {
		t.Fatal(err)
	}
	return tel
}

func (tel *telemetry) metrics(t *testing.T) map[string]metricdata.Aggregation {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sum returns the counter's value for the attributes.
func sum(t *testing.T, agg metricdata.Aggregation, kv ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := agg.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("not an int64 sum: %T", agg)
	}
	want := attribute.NewSet(kv...)
	for _, dp := range s.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Value
		}
	}
	return 0
}

// count returns how many values the histogram recorded for the attributes.
func count(t *testing.T, agg metricdata.Aggregation, kv ...attribute.KeyValue) uint64 {
	t.Helper()
	h, ok := agg.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("not a float64 histogram: %T", agg)
	}
	want := attribute.NewSet(kv...)
	for _, dp := range h.DataPoints {
		if dp.Attributes.Equals(&want) {
			return dp.Count
		}
	}
	return 0
}

var (
	tool     = attribute.String("oncely.tool", "refund")
	executed = attribute.String("oncely.outcome", "executed")
	replayed = attribute.String("oncely.outcome", "already done")
)

// One fresh call, one replay, one call whose provider call is ambiguous and
// is settled by the reconciler, and one left uncertain: the counters,
// histograms, spans and the uncertain gauge say so.
func TestFreshReplayReconcile(t *testing.T) {
	t.Parallel()
	tel := newTelemetry(t)
	ctx := context.Background()
	store := ledgermem.New(nil)
	exec := client.New(tel.in.Store(store), nil)
	runs := 0
	refund := client.Tool{
		Name:     "refund",
		Identity: []client.Field{{Path: "order"}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			runs++
			if runs == 2 { // the second refund: the provider call is ambiguous
				return client.Effect{}, errors.New("connection reset after the request was sent")
			}
			return client.Effect{Summary: "refunded"}, nil
		},
		Reconciler: client.ReconcilerFunc(func(context.Context, client.Invocation) (client.Reconciliation, error) {
			return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "refund found"}}, nil
		}),
	}
	lost := client.Tool{
		Name:     "lost",
		Identity: []client.Field{{Path: "id"}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			return client.Effect{}, errors.New("timeout after sending")
		},
	}
	if err := exec.Register(tel.in.Tool(refund), tel.in.Tool(lost)); err != nil {
		t.Fatal(err)
	}
	reg, err := tel.in.UncertainGauge(store)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	traced := tel.in.Executor(exec)
	for i, c := range []struct {
		tool, input string
		want        client.Outcome
	}{
		{"refund", `{"order": 1}`, client.Executed},
		{"refund", `{"order": 1}`, client.AlreadyDone},
		{"refund", `{"order": 2}`, client.Executed}, // ambiguous, then found by the reconciler
		{"lost", `{"id": 3}`, client.Uncertain},
	} {
		res, err := traced.Execute(ctx, "run-1", client.Call{Tool: c.tool, Input: json.RawMessage(c.input)})
		if err != nil || res.Outcome != c.want {
			t.Fatalf("call %d: %v %v, want %v", i, res.Outcome, err, c.want)
		}
	}

	m := tel.metrics(t)
	if n := sum(t, m["oncely.calls"], tool, executed); n != 2 {
		t.Errorf("executed calls: %d, want 2", n)
	}
	if n := sum(t, m["oncely.calls"], tool, replayed); n != 1 {
		t.Errorf("replayed calls: %d, want 1", n)
	}
	if n := sum(t, m["oncely.calls"], attribute.String("oncely.tool", "lost"), attribute.String("oncely.outcome", "uncertain")); n != 1 {
		t.Errorf("uncertain calls: %d, want 1", n)
	}
	if n := sum(t, m["oncely.reconciles"], tool, attribute.String("oncely.verdict", client.VerdictFound.String())); n != 1 {
		t.Errorf("reconciles found: %d, want 1", n)
	}
	if n := count(t, m["oncely.execute.duration"], tool, executed); n != 2 {
		t.Errorf("execute durations (executed): %d, want 2", n)
	}
	if n := count(t, m["oncely.ledger.duration"], attribute.String("oncely.ledger.op", "claim"), attribute.Bool("error", false)); n != 4 {
		t.Errorf("claim durations: %d, want 4", n)
	}
	if n := count(t, m["oncely.tool.duration"], tool, attribute.String("oncely.error_class", "none")); n != 1 {
		t.Errorf("successful refund runs: %d, want 1", n)
	}
	if n := count(t, m["oncely.tool.duration"], tool, attribute.String("oncely.error_class", "ambiguous")); n != 1 {
		t.Errorf("ambiguous refund runs: %d, want 1", n)
	}
	g, ok := m["oncely.records.uncertain"].(metricdata.Gauge[int64])
	if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 1 {
		t.Errorf("uncertain gauge: %+v", m["oncely.records.uncertain"])
	}

	// Spans: one oncely.execute per call, with the steps as children.
	children := map[string][]string{} // execute span id -> child names
	var executes []sdktrace.ReadOnlySpan
	for _, s := range tel.spans.Ended() {
		if s.Name() == "oncely.execute" {
			executes = append(executes, s)
		}
	}
	if len(executes) != 4 {
		t.Fatalf("execute spans: %d, want 4", len(executes))
	}
	for _, s := range tel.spans.Ended() {
		if s.Name() != "oncely.execute" && s.Name() != "oncely.list" {
			p := s.Parent().SpanID().String()
			children[p] = append(children[p], s.Name())
		}
	}
	want := [][]string{
		{"oncely.claim", "oncely.tool.run", "oncely.record"},
		{"oncely.claim"},
		{"oncely.claim", "oncely.tool.run", "oncely.reconcile", "oncely.record"},
		{"oncely.claim", "oncely.tool.run", "oncely.record"},
	}
	for i, s := range executes {
		got := children[s.SpanContext().SpanID().String()]
		if len(got) != len(want[i]) {
			t.Errorf("call %d: children %v, want %v", i, got, want[i])
			continue
		}
		for j := range got {
			if got[j] != want[i][j] {
				t.Errorf("call %d: children %v, want %v", i, got, want[i])
				break
			}
		}
	}
	if got := executes[3].Status().Code.String(); got != "Error" {
		t.Errorf("uncertain call's span status: %s", got)
	}
}

// The traced store hides none of the wrapped store's optional interfaces.
func TestStorePassesCapabilities(t *testing.T) {
	tel := newTelemetry(t)
	ledgertest.RunWrapper(t, tel.in.Store)
}
