package oncelyotel_test

import (
	"context"
	"encoding/json"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/telemetry/oncelyotel"
)

// An executor whose ledger, tool and calls are traced and measured. The
// model calls send_reply twice: one span per call, and the outcomes are
// counted by tool.
func Example() {
	ctx := context.Background()
	spans := tracetest.NewSpanRecorder() // in production: an exporter's span processor
	reader := sdkmetric.NewManualReader()
	in, err := oncelyotel.New(&oncelyotel.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		panic(err)
	}
	exec := client.New(in.Store(ledgermem.New(nil)), nil)
	err = exec.Register(in.Tool(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "reply sent on ticket 42"}, nil
		},
	}))
	if err != nil {
		panic(err)
	}
	traced := in.Executor(exec)
	for range 2 {
		if _, err := traced.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)}); err != nil {
			panic(err)
		}
	}

	for _, s := range spans.Ended() {
		fmt.Println("span", s.Name())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if m.Name == "oncely.calls" {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				outcome, _ := dp.Attributes.Value("oncely.outcome")
				fmt.Println("calls", outcome.AsString(), dp.Value)
			}
		}
	}
	// Unordered output:
	// span oncely.claim
	// span oncely.tool.run
	// span oncely.record
	// span oncely.execute
	// span oncely.claim
	// span oncely.execute
	// calls executed 1
	// calls already done 1
}
